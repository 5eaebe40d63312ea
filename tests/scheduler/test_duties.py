"""The background duties' loop: an outage of Redis or the database is reported once, not as a failure per tick."""

from __future__ import annotations

import asyncio
import logging

from redis.exceptions import ConnectionError as RedisConnectionError

from app.scheduler.duties.runner import Duties


async def test_an_outage_is_said_once_when_it_starts_and_once_when_it_ends(app, caplog):
    duties = Duties(app.state.wlm, 1, lambda: True, "test-owner")
    calls = 0

    async def flush_records() -> None:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        if calls == 5:
            duties._stopping = True

    with caplog.at_level(logging.INFO, logger="app.scheduler.duties.runner"):
        await asyncio.wait_for(duties._every(0, flush_records), timeout=30)
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "app.scheduler.duties.runner"]
    assert said == [
        ("WARNING", "background duty flush_records: waiting for the redis to answer; said once until it changes or clears"),
        ("INFO", "background duty flush_records: recovered"),
    ]
