from __future__ import annotations

from pydantic import BaseModel, Field


class ResourceGroupOut(BaseModel):
    name: str
    description: str
    service_classes: list[str]
    max_in_flight: int | None
    min_in_flight: int | None
    in_flight: int = Field(description="its requests selected or begun now (and slots taken for selects under way)")
    capped_seconds: float = Field(description="how long its work has waited on max_in_flight, in all")


class ResourceGroupList(BaseModel):
    items: list[ResourceGroupOut]
