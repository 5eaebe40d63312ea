"""What the application environment's API takes and answers. Each part is computed by the domain that holds it, in
that domain's models: the display (app.operator), the server limits (app.servers), an instance's routing change
(app.routing), a dynamic definition's body (app.policy); they are named here so that the router knows this package
only. The answers made here are defined here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from app.operator.schemas import ApplicationEnvironmentList, ApplicationEnvironmentOut
from app.policy.schemas import DynamicApplicationEnvironmentIn, EnvironmentSettings
from app.routing.schemas import InstanceRoutingPatch
from app.servers.schemas import ServerLimitsIn, ServerLimitsOut

__all__ = [
    "ApplicationEnvironmentList",
    "ApplicationEnvironmentOut",
    "DynamicApplicationEnvironmentIn",
    "DynamicApplicationEnvironmentOut",
    "InstanceOut",
    "InstanceRoutingPatch",
    "ServerLimitsIn",
    "ServerLimitsOut",
]


class DynamicApplicationEnvironmentOut(EnvironmentSettings):
    subsystem_type: str
    subsystem_name: str
    queue_manager_id: int  # the connection it belongs to; removed when that connection ends
    defined_at: datetime


class InstanceOut(BaseModel):
    node: str
    application_environment: str
    overridden: dict[str, Any]
