from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    UrlConstraints,
    field_validator,
)

from app.shared.schemas import INTEGRAL, Name, StrictModel, SubsystemType


class QueueManagerConnect(StrictModel):
    role: Literal["queue_manager"]
    subsystem_type: SubsystemType
    subsystem_name: Name
    node: Name | None = None
    # Called (POST, HMAC-signed) when the service deletes a request this queue manager queued; must match
    # the allowlist the admin configures (WLM_EXIT_URL_ALLOWLIST).
    exit_url: Annotated[AnyHttpUrl, UrlConstraints(max_length=2048)] | None = None


class ServerConnect(StrictModel):
    role: Literal["server"]
    subsystem_type: SubsystemType
    subsystem_name: Name
    node: Name | None = None
    application_environment: Name
    worker_tasks: Annotated[
        int, Field(strict=True, ge=1, le=1000, description="requests the server can hold in flight at once"), INTEGRAL
    ] = 1
    worker_weight: Annotated[int, Field(strict=True, ge=1, le=1000, description="servers of higher weight get work first"), INTEGRAL] = 1
    overflow: StrictBool = Field(default=False, description="take work only when every other server of the AE is at capacity")
    instance: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:@-]+$")] | None = Field(
        default=None,
        description="the process this connection is, as its launcher names it (the launcher finds it by this when the process exits)",
    )


ConnectIn = Annotated[QueueManagerConnect | ServerConnect, Field(discriminator="role")]


class ConnectionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    role: str
    principal: str
    subsystem_type: str
    subsystem_name: str
    node: str | None
    application_environment: str | None
    worker_tasks: int | None
    worker_weight: int | None
    overflow: bool
    instance: str | None = None
    exit_url: str | None
    state: str
    connected_at: datetime
    last_heartbeat_at: datetime
    disconnected_at: datetime | None
    disconnect_reason: str | None

    @field_validator("principal", mode="before")
    @classmethod
    def _principal_name(cls, value: Any) -> Any:
        return getattr(value, "name", value)


class ConnectionCreated(ConnectionOut):
    # The connect token (IWM4CON's output); shown only here, sent back on every later call.
    token: str
    # Queue managers with an exit URL: the key of the HMAC-SHA256 signature on exit calls (shown only here).
    exit_secret: str | None = None
    heartbeat_interval_s: float
    heartbeat_timeout_s: float


class HeartbeatOut(BaseModel):
    id: int
    state: str
    last_heartbeat_at: datetime
    heartbeat_interval_s: float
    leases_extended: int = 0  # servers: held requests whose completion time started again


class DisconnectOut(BaseModel):
    id: int
    state: str
    disconnected_at: datetime
    # True when an earlier DELETE already disconnected it; DELETE is idempotent.
    already_disconnected: bool
    purged: int = 0  # queue manager: its queued requests removed (exits called)
    requeued: int = 0  # server: its held requests given back to the front of their queues
    abandoned: int = 0  # server: held requests that had reached their maximum deliveries
    removed_application_environments: list[str] = []  # queue manager: its dynamic ones (IWM4AEDF), removed with it


class ConnectionList(BaseModel):
    items: list[ConnectionOut]
    total: int
    limit: int
    offset: int
