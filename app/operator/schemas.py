from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.operator.states import AEState
from app.servers.schemas import ServerLimitsOut


class VaryOut(BaseModel):
    """An accepted VARY command: the state it left and the one it entered."""

    command: str = Field(description="the command in its canonical spelling, e.g. `VARY WLM,APPLENV=PAYROLL,QUIESCE`")
    application_environment: str
    dynamic: bool
    previous_state: AEState
    state: AEState
    changed_at: datetime
    changed_by: str


class NodeActivity(BaseModel):
    node: str
    servers: int = Field(description="servers connected to this environment on this node")
    in_flight: int = Field(description="requests its servers hold (selected or begun)")
    queued: dict[str, int] = Field(description="queued requests per service class (classes with none left out)")


class StartError(BaseModel):
    """Why the launcher's last start of a server failed (app/scheduler/duties/launcher.py)."""

    at: datetime
    node: str
    instance: str = Field(description="the launched process's name, as in `<data dir>/servers/<instance>.log`")
    exit_status: int | None = Field(description="null: the command could not be run at all")
    log_tail: str = Field(description="the last lines the process wrote, or why it could not be run")


class ApplicationEnvironmentOut(BaseModel):
    """One line of `D WLM,APPLENV=...`: the state and what the environment holds, over every node hosting it."""

    name: str
    state: AEState
    dynamic: bool = False
    in_policy: bool = Field(description="false for an environment the active policy no longer names (DELETING)")
    subsystem_type: str | None = Field(description="null once the environment has left the policy")
    changed_at: datetime | None = Field(description="when the state last changed; null: never (AVAILABLE from the start)")
    changed_by: str | None = Field(description="the principal of the command, or `wlm` for an internal event")
    reason: str | None = Field(description="the command or the internal event that set the state")
    refreshed_at: datetime | None = Field(description="when the last REFRESH was accepted")
    servers: int
    in_flight: int
    queued: dict[str, int] = Field(description="queued requests per service class, summed over nodes, most important class first")
    queued_total: int
    nodes: list[NodeActivity] = Field(
        description="the nodes hosting the environment (for one that left the policy: those still holding some of it)"
    )
    performance: dict[str, float | None] | None = Field(
        default=None,
        description="performance index per service class (first period, the worst over "
        "the nodes) from the latest goal evaluation; null before the first",
    )
    server_limits: ServerLimitsOut | None = Field(
        default=None, description="the server limits in force (the policy's or IWM4SLI's); null once the environment has left the policy"
    )
    last_start_error: StartError | None = Field(
        default=None,
        description="the launcher's latest failed start of a server (any node) since a start last succeeded; null: none",
    )


class ApplicationEnvironmentList(BaseModel):
    command: str = Field(description="the DISPLAY command answered, e.g. `DISPLAY WLM,APPLENV=*`")
    items: list[ApplicationEnvironmentOut]


class OperatorCommandOut(BaseModel):
    """A VARY command as the audit trail recorded it, accepted or refused."""

    id: int
    at: datetime
    actor: str
    command: str
    application_environment: str
    dynamic: bool
    result: Literal["accepted", "refused"]
    previous_state: AEState | None = None
    state: AEState | None = Field(default=None, description="accepted: the new state; refused for the state: the state it was in")
    error: str | None = Field(default=None, description="refused: the error code (`wrong_state`, `unknown_application_environment`, ...)")
    message: str | None = None


class OperatorCommandList(BaseModel):
    items: list[OperatorCommandOut]
    total: int
    limit: int
    offset: int
