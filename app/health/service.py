from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.migrate import current_revision
from app.queues.store import QueueStore

CHECK_TIMEOUT_SECONDS = 2.0


async def _check_redis(queues: QueueStore) -> str:
    await queues.ping()
    return "ok"


async def _check_database(engine: AsyncEngine, head: str | None) -> str:
    async with engine.connect() as connection:
        await connection.execute(text("SELECT 1"))
    revision = await current_revision(engine)
    if revision != head:
        raise RuntimeError(f"schema at {revision}, code expects {head}: run `wlm db upgrade`")
    return "ok"


async def readiness(queues: QueueStore, engine: AsyncEngine, head: str | None) -> dict[str, str]:
    """Each dependency's state: 'ok' or what is wrong with it."""
    checks = {"redis": _check_redis(queues), "database": _check_database(engine, head)}
    results = await asyncio.gather(*(asyncio.wait_for(check, CHECK_TIMEOUT_SECONDS) for check in checks.values()), return_exceptions=True)
    return {
        name: result if isinstance(result, str) else f"{type(result).__name__}: {result}".rstrip(": ")
        for name, result in zip(checks, results, strict=True)
    }
