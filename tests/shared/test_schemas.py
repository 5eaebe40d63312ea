"""Request bodies take what their schema says, no more and no less. JSON Schema's "integer" admits a number without a
fraction (2.0), so every strict int takes one (app/shared/schemas.py INTEGRAL) and still refuses what the schema
refuses; a "boolean" is true or false, never 1 or "yes", which pydantic's lax mode would take."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field, ValidationError

from app.shared.schemas import INTEGRAL, IsoDate, IsoDateTime, StrictModel

ROOT = Path(__file__).resolve().parents[2]


class Bounded(StrictModel):
    count: Annotated[int, Field(strict=True, ge=1, le=10), INTEGRAL] = 1
    limit: Annotated[int, Field(strict=True, gt=0), INTEGRAL] | None = None


@pytest.mark.parametrize(("raw", "count"), [("2", 2), ("2.0", 2), ("1e1", 10), ("-0.0e0", None)])
def test_a_number_without_a_fraction_is_the_int_it_is(raw: str, count: int | None) -> None:
    if count is None:  # -0.0 is 0: below the bound
        with pytest.raises(ValidationError):
            Bounded.model_validate_json(f'{{"count": {raw}}}')
        return
    parsed = Bounded.model_validate_json(f'{{"count": {raw}}}')
    assert parsed.count == count and type(parsed.count) is int


@pytest.mark.parametrize("raw", ['"2"', "2.5", "true", "1e999", "11.0", "null"])
def test_what_the_schema_refuses_stays_refused(raw: str) -> None:
    with pytest.raises(ValidationError):
        Bounded.model_validate_json(f'{{"count": {raw}}}')


def test_the_bounds_stay_in_the_schema() -> None:
    properties = Bounded.model_json_schema()["properties"]
    assert properties["count"] == {"default": 1, "maximum": 10, "minimum": 1, "title": "Count", "type": "integer"}
    assert properties["limit"]["anyOf"][0] == {"exclusiveMinimum": 0, "type": "integer"}
    assert Bounded.model_validate({"limit": 3.0}).limit == 3


def _strict_ints(schema: Any, integral: bool = False) -> Iterator[bool]:
    """For every strict int of a pydantic core schema, whether INTEGRAL's conversion comes before it."""
    if isinstance(schema, dict):
        if schema.get("type") == "int" and schema.get("strict"):
            yield integral
        wrapped = schema.get("type") == "function-before" and schema["function"].get("function") is INTEGRAL.func
        for value in schema.values():
            yield from _strict_ints(value, integral or wrapped)
    elif isinstance(schema, list):
        for value in schema:
            yield from _strict_ints(value, integral)


def _request_models() -> list[type[StrictModel]]:
    for path in sorted((ROOT / "app").rglob("*.py")):
        if path.name == "__main__.py":  # runs the command line
            continue
        importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
    found, todo = [], [StrictModel]
    while todo:
        found += (subclasses := todo.pop().__subclasses__())
        todo += subclasses
    return found


def test_every_strict_int_of_a_request_body_takes_a_number_without_a_fraction() -> None:
    models = _request_models()
    checked = {model.__name__: list(_strict_ints(model.__pydantic_core_schema__)) for model in models}
    assert sum(map(len, checked.values())) > 20  # the policy's, the connect's, the select's ... were read
    assert sorted(name for name, found in checked.items() if not all(found)) == []


def _lax_booleans(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        if schema.get("type") == "bool" and not schema.get("strict"):
            yield schema
        for value in schema.values():
            yield from _lax_booleans(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _lax_booleans(value)


def test_every_boolean_of_a_request_body_is_true_or_false() -> None:
    lax = sorted(model.__name__ for model in _request_models() if any(_lax_booleans(model.__pydantic_core_schema__)))
    assert lax == []


class Moments(StrictModel):
    day: IsoDate | None = None
    at: IsoDateTime | None = None


@pytest.mark.parametrize(("field", "value"), [("day", "2026-11-27"), ("at", "2026-11-27T12:00:00Z"), ("at", "2026-11-27t12:00:00+01:00")])
def test_a_date_or_date_time_is_iso_text(field: str, value: str) -> None:
    assert getattr(Moments.model_validate({field: value}), field) is not None


@pytest.mark.parametrize(
    ("field", "value"),
    [("day", 0), ("day", "0"), ("day", "20261127"), ("day", "2026-11-27T00:00:00Z")]
    + [("at", 0.5), ("at", "1795737600"), ("at", "2026-11-27")],
)
def test_a_number_or_another_format_is_no_date(field: str, value: object) -> None:
    """Lax validation takes a number, or digits, as seconds since the epoch, and a date for a date-time."""
    with pytest.raises(ValidationError):
        Moments.model_validate({field: value})
