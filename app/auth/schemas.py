from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from app.auth.profiles import PROFILE_PATTERN
from app.auth.roles import Role
from app.shared.schemas import Description, IsoDateTime, StrictModel

PrincipalName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._@-]+$")]
Profile = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255, pattern=PROFILE_PATTERN)]


class PrincipalIn(StrictModel):
    name: PrincipalName
    description: Description = ""
    roles: list[Role] = Field(min_length=1)
    # SAF-style profiles for server connects, e.g. "CB.*.PAYROLL" or "CB.**".
    permits: list[Profile] = Field(default_factory=list)


class PrincipalUpdate(StrictModel):
    description: Description | None = None
    roles: list[Role] | None = Field(default=None, min_length=1)
    permits: list[Profile] | None = None


class PrincipalOut(BaseModel):
    name: str
    description: str
    roles: list[Role]
    permits: list[str]
    created_at: datetime
    created_by: str


class PrincipalList(BaseModel):
    items: list[PrincipalOut]


class ApiKeyIn(StrictModel):
    principal: PrincipalName
    description: Description = ""
    expires_at: IsoDateTime | None = None


class ApiKeyOut(BaseModel):
    id: str
    principal: str
    description: str
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyOut):
    # The key itself; shown only in this response.
    key: str


class ApiKeyList(BaseModel):
    items: list[ApiKeyOut]


class WhoAmI(BaseModel):
    principal: str
    roles: list[Role]
    permits: list[str]
    key_id: str
