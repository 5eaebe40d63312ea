"""Pydantic building blocks shared by every domain's schemas."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints


class StrictModel(BaseModel):
    """Request bodies refuse unknown fields, so a typo is a 422 and not a silently ignored setting."""

    model_config = ConfigDict(extra="forbid")


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
