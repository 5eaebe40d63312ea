"""WLM_DURABILITY (app/queues/durability.py): in strict mode an insert is answered once Redis has it on disk, and
a service refuses to start on a Redis that cannot promise it."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from app.embedded_redis import EmbeddedRedis
from app.errors import ServiceUnavailable
from app.queues import durability
from app.queues.durability import Durability, NotDurable, durability_of
from app.queues.hot_path import NewRequest
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from tests.processes import WLM, ServiceProcess

pytestmark = pytest.mark.asyncio


@pytest.fixture
def everysec_redis(tmp_path):
    """An external Redis as many are run: AOF fsynced once a second."""
    server = EmbeddedRedis(tmp_path / "external", "fast")
    yield server.start()
    server.stop()


PROBE = "wlmtest:durability:probe"
STRICT_CONFIG = {"appendonly": "yes", "appendfsync": "always", "no-appendfsync-on-rewrite": "no"}


class OlderRedis:
    """The answers of a Redis without WAITAOF (before 7.2), as far as the startup check asks."""

    def __init__(self, config: dict[str, str] | None) -> None:
        self.config = config  # None: CONFIG refused, as managed services do
        self.written: list[str] = []

    def client(self) -> OlderRedis:
        return self

    async def __aenter__(self) -> OlderRedis:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def incr(self, key: str) -> int:
        self.written.append(key)
        return len(self.written)

    async def execute_command(self, *args: Any) -> Any:
        raise ResponseError(f"unknown command '{args[0]}'")

    async def config_get(self, pattern: str) -> dict[str, str]:
        if self.config is None:
            raise ResponseError("unknown command 'CONFIG'")
        return {name: value for name, value in self.config.items() if name.startswith(pattern.rstrip("*"))}


class WaitaofRedis(OlderRedis):
    """A managed Redis 7.2+ (CONFIG refused) whose AOF confirms fsyncs (1) or does not within the timeout (0)."""

    def __init__(self, fsynced: int) -> None:
        super().__init__(None)
        self.fsynced = fsynced

    async def execute_command(self, *args: Any) -> list[int]:
        assert args[:3] == ("WAITAOF", 1, 0)
        return [self.fsynced, 0]


async def test_strict_refuses_to_start_on_a_redis_that_fsyncs_every_second(tmp_path, everysec_redis):
    process = ServiceProcess(tmp_path, redis_url=everysec_redis)
    result = subprocess.run([WLM, "serve"], cwd=tmp_path, env=process.env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "appendfsync everysec" in result.stderr and "appendfsync always" in result.stderr, result.stderr
    assert "WLM_DURABILITY=fast" in result.stderr


async def test_fast_accepts_it_and_strict_accepts_appendfsync_always(everysec_redis, redis_url):
    async with Redis.from_url(everysec_redis) as redis:
        assert not (await durability_of(redis, "fast", PROBE)).waitaof
    async with Redis.from_url(redis_url) as redis:  # the tests' embedded Redis, strict by default
        await durability_of(redis, "strict", PROBE)


async def test_strict_reads_the_configuration_where_it_can(caplog):
    """appendfsync always, with no pause during rewrites, is on disk before each reply; nothing else is strict, not
    even where WAITAOF exists (with everysec some servers confirm fsyncs they have not done)."""
    assert not (await durability_of(OlderRedis(STRICT_CONFIG), "strict", PROBE)).waitaof  # type: ignore[arg-type]
    with pytest.raises(NotDurable, match="appendonly no, appendfsync everysec"):
        await durability_of(OlderRedis(STRICT_CONFIG | {"appendonly": "no", "appendfsync": "everysec"}), "strict", PROBE)  # type: ignore[arg-type]
    with pytest.raises(NotDurable, match="no-appendfsync-on-rewrite yes"):
        await durability_of(OlderRedis(STRICT_CONFIG | {"no-appendfsync-on-rewrite": "yes"}), "strict", PROBE)  # type: ignore[arg-type]
    unverifiable = OlderRedis(None)
    with caplog.at_level(logging.WARNING, logger="app.queues.durability"):
        assert not (await durability_of(unverifiable, "strict", PROBE)).waitaof  # type: ignore[arg-type]
    assert "cannot be verified" in caplog.text and unverifiable.written == [PROBE]


async def test_strict_where_config_is_refused_uses_waitaof_if_it_confirms_a_write():
    confirming = WaitaofRedis(1)
    assert (await durability_of(confirming, "strict", PROBE)).waitaof  # type: ignore[arg-type]
    assert confirming.written == [PROBE]  # a write of its own: WAITAOF on a connection without one answers at once
    with pytest.raises(NotDurable, match="does not confirm"):
        await durability_of(WaitaofRedis(0), "strict", PROBE)  # type: ignore[arg-type]
    with pytest.raises(ServiceUnavailable) as refused:
        await durability.confirm(WaitaofRedis(0))  # type: ignore[arg-type]
    assert (refused.value.status, refused.value.code) == (503, "not_durable")


async def test_an_insert_and_its_waitaof_go_on_one_connection(tmp_path, monkeypatch):
    """WAITAOF waits only for the writes of the connection it is sent on: sent on another, it would confirm at once."""
    server = EmbeddedRedis(tmp_path)  # a Redis of its own: no other connection has just run a script
    url = server.start()
    inserted_on: list[int] = []
    confirmed_on: list[int] = []
    try:
        async with Redis.from_url(url, decode_responses=True) as redis, Redis.from_url(url) as observer:

            async def confirm(connection: Redis) -> None:  # this Redis (7.0) has no WAITAOF: which connection is enough
                inserted_on.extend(int(client["id"]) for client in await observer.client_list() if client["cmd"] == "evalsha")
                async with redis.client() as busy:  # holds the connection the pool would give out next
                    await busy.ping()
                    confirmed_on.append(await connection.client_id())

            monkeypatch.setattr(durability, "confirm", confirm)
            store = QueueStore(redis, "wlm", idempotency_ttl_s=60, tombstone_ms=1000, samples_ms=1000, durability=Durability(waitaof=True))
            request = NewRequest(uuid.uuid4().hex, "ONLINE", False, {"sc": "ONLINE"}, "{}", None)
            assert await store.insert(AeKeys("wlm", "LOCAL", "PAYROLL"), 1, [request], 10) == [request.id]
    finally:
        server.stop()
    assert len(confirmed_on) == 1 and inserted_on == confirmed_on


async def test_a_redis_that_does_not_answer_at_start_is_checked_at_the_first_insert(redis_url):
    """The service starts without Redis (not ready, /readyz says why); strict mode is then checked when work comes."""
    unreachable = Redis.from_url("redis://127.0.0.1:1/0", decode_responses=True)
    deferred = await durability.durability_at_start(unreachable, "strict", PROBE)
    await unreachable.aclose()
    assert isinstance(deferred, durability.DeferredDurability)
    refusing = OlderRedis(STRICT_CONFIG | {"appendfsync": "everysec"})
    with pytest.raises(ServiceUnavailable, match="appendfsync everysec") as refused:
        await deferred.write(refusing, lambda client: asyncio.sleep(0, "written"))  # type: ignore[arg-type]
    assert refused.value.code == "not_durable"
    accepting = durability.DeferredDurability("strict", PROBE)
    written = await accepting.write(OlderRedis(STRICT_CONFIG), lambda client: asyncio.sleep(0, "written"))  # type: ignore[arg-type]
    assert written == "written"
