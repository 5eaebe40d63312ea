from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.auth.models import Principal
from app.db import Base, utcnow


class Connection(Base):
    """A queue manager's or a server's session with the service (IWM4CON .. IWM4DIS).

    Work in Redis refers to connections by `id` (the queue manager that inserted it, the server that holds
    it), so a disconnect can purge a queue manager's queued requests and give a server's in-flight work back.
    """

    __tablename__ = "connections"
    __table_args__ = (
        CheckConstraint("role IN ('queue_manager', 'server')", name="role"),
        CheckConstraint("state IN ('active', 'disconnected')", name="state"),
        CheckConstraint("role = 'server' OR application_environment IS NULL", name="server_fields"),
        Index(None, "role", "state"),
        Index(None, "subsystem_type", "subsystem_name", "state"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id", ondelete="RESTRICT"), index=True)
    role: Mapped[str] = mapped_column(String(16))
    subsystem_type: Mapped[str] = mapped_column(String(8))
    subsystem_name: Mapped[str] = mapped_column(String(32))
    node: Mapped[str | None] = mapped_column(String(32))
    # Servers: the environment they serve and their capacity (worker tasks) and dispatch preference (weight).
    application_environment: Mapped[str | None] = mapped_column(String(32))
    worker_tasks: Mapped[int | None]
    worker_weight: Mapped[int | None]
    # A server that takes work only when every other server of its environment is at capacity.
    overflow: Mapped[bool] = mapped_column(default=False)
    # Servers: the process, as the launcher that started it names it (WLM_SERVER_INSTANCE), so its exit is known.
    instance: Mapped[str | None] = mapped_column(String(64), index=True)
    # Queue managers: the exit (QMGR_EXIT) called when the service deletes a request they queued.
    exit_url: Mapped[str | None] = mapped_column(String(2048))
    # Key of the HMAC signature on this queue manager's exit calls; given to it once, at connect.
    exit_secret: Mapped[str | None] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), default="active")
    connected_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_heartbeat_at: Mapped[datetime] = mapped_column(default=utcnow)
    disconnected_at: Mapped[datetime | None]
    # requested (IWM4DIS by the connection itself), forced (by an admin), expired (a server fell silent), exited (a
    # launched server process ended without disconnecting), stopped (a launched server stopped with the service)
    disconnect_reason: Mapped[str | None] = mapped_column(String(32))

    principal: Mapped[Principal] = relationship(lazy="joined")
