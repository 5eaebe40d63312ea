from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow
from app.operator.states import AEState

# The command text or the internal event (with what the manager loop says of it), cut to fit.
REASON_MAX_LENGTH = 256


class ApplicationEnvironmentState(Base):
    """The state of an application environment that has ever left AVAILABLE; one with no row is AVAILABLE.

    `version` is the ORM's optimistic lock: an UPDATE that finds another process's change first matches no row and
    fails, on SQLite too, where SELECT ... FOR UPDATE does not exist."""

    __tablename__ = "application_environment_states"
    __table_args__ = (
        CheckConstraint(f"state IN ({', '.join(repr(state.value) for state in AEState)})", name="state"),
        CheckConstraint("name = upper(name)", name="name_upper_case"),
    )

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    changed_at: Mapped[datetime] = mapped_column(default=utcnow)
    changed_by: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(String(REASON_MAX_LENGTH))
    # When the last REFRESH was accepted: servers connected before it are replaced.
    refreshed_at: Mapped[datetime | None]
    version: Mapped[int] = mapped_column()

    __mapper_args__ = {"version_id_col": version}
