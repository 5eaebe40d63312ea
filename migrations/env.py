"""Alembic environment: runs migrations on the service's async engine (SQLite or PostgreSQL)."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.config import get_settings
from app.db import Base, create_engine
from app.models import import_all_models

import_all_models()
config = context.config


def _url() -> str:
    return config.attributes.get("database_url") or get_settings().resolved_database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Replicas starting together: one migrates, the others wait here and then find nothing to do.
            connection.execute(text("SELECT pg_advisory_xact_lock(727163)"))
        context.run_migrations()


async def _run_online() -> None:
    engine = create_engine(_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=Base.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_online())
