"""Pydantic building blocks shared by every domain's schemas."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from datetime import date, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, StringConstraints, ValidationError
from pydantic_core import InitErrorDetails


class StrictModel(BaseModel):
    """Request bodies refuse unknown fields, so a typo is a 422 and not a silently ignored setting, and numbers that
    are not finite (NaN, Infinity), which JSON cannot carry back."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _non_finite_numbers(document: Any) -> Iterator[InitErrorDetails]:
    """Where in a decoded JSON document a number is not finite. Iterative: documents may nest deeper than Python
    recurses."""
    if isinstance(document, float) and not math.isfinite(document):
        yield {"type": "finite_number", "loc": (), "input": document}
    containers: list[tuple[tuple[str | int, ...], Any]] = [((), document)] if isinstance(document, dict | list) else []
    while containers:
        loc, container = containers.pop()
        for key, item in container.items() if isinstance(container, dict) else enumerate(container):
            if isinstance(item, float):
                if not math.isfinite(item):
                    yield {"type": "finite_number", "loc": (*loc, key), "input": item}
            elif isinstance(item, dict | list):
                containers.append(((*loc, key), item))


def _all_finite(document: Any) -> bool:
    """Whether every number in a decoded JSON document is finite: the common case, checked without keeping paths."""
    pending = [document]
    while pending:
        item = pending.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


def _finite(document: Any) -> Any:
    if not _all_finite(document):
        raise ValidationError.from_exception_data("JsonDocument", list(_non_finite_numbers(document)))
    return document


# Free-form JSON a client sends (a work payload, a result). NaN and Infinity are no JSON, and 1e999 is beyond a
# double, yet Python's and pydantic's parsers take them as floats, which would be stored and delivered as null:
# refused, with the path to each. Typed Any, not JsonValue: under StrictModel's allow_inf_nan, JsonValue would
# refuse them itself on FastAPI's routes, with its union's tags in the paths ("payload.dict.x.list[1].float").
JsonDocument = Annotated[Any, AfterValidator(_finite)]


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


# Last in a strict int's Annotated (after its Field, whose bounds the schema would otherwise lose): a number without a
# fraction, 2.0 as well as 2, is the int it is, as JSON Schema's "integer" reads it; strings, booleans and 2.5 stay
# refused, as the strict Field says.
INTEGRAL = BeforeValidator(_integral)


_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_DATE_TIME_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt]")


def _text_of(pattern: re.Pattern[str], example: str) -> BeforeValidator:
    def check(value: Any) -> Any:
        if isinstance(value, date) or (isinstance(value, str) and pattern.match(value)):
            return value
        raise ValueError(f"must be ISO 8601 text, such as {example}")

    return BeforeValidator(check)


# A date or date-time given as the schema's "format" says, as ISO 8601 text. Lax validation also takes a number, or a
# text of digits, as seconds since the epoch, and a date alone for a date-time, which neither format is.
IsoDate = Annotated[date, _text_of(_DATE_TEXT, "2026-11-27")]
IsoDateTime = Annotated[datetime, _text_of(_DATE_TIME_TEXT, "2026-11-27T12:00:00Z")]


def _upper(value: str) -> str:
    return value.upper()


# WLM names (service classes, report classes, application environments, nodes, subsystem types) are
# case-insensitive, as on z/OS: they are stored and compared in upper case.
Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=32, pattern=r"^[A-Za-z0-9$#@_][A-Za-z0-9$#@_.-]*$"),
    AfterValidator(_upper),
]
SubsystemType = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=8, pattern=r"^[A-Za-z0-9$#@]+$"),
    AfterValidator(_upper),
]
# Free text: anything printable-ish, but no NUL, which PostgreSQL cannot store.
Description = Annotated[str, StringConstraints(max_length=256, pattern=r"^[^\x00]*$")]
