"""WLM_DURABILITY (app/redis/durability.py): in strict mode an insert is answered once Redis has it on disk, and
a service refuses to start on a Redis that cannot promise it."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from app.config import Settings
from app.errors import ServiceUnavailable
from app.queues.keys import AeKeys
from app.queues.request_meta import RequestMeta
from app.queues.script_specs import INSERT as INSERT_SPEC
from app.queues.store import QueueStore
from app.queues.transitions import NewRequest
from app.redis import durability
from app.redis.durability import Durability, NotDurable, durability_of
from app.redis.embedded import EmbeddedRedis
from app.redis.script_spec import ScriptCall
from tests.conftest import client_of, running_app
from tests.processes import WLM, ServiceProcess
from tests.redis_cluster import Replica, replica_of
from tests.waiting import eventually
from tests.work.conftest import ONLINE, make_world

pytestmark = pytest.mark.asyncio


@pytest.fixture
def everysec_redis(tmp_path):
    """An external Redis as many are run: AOF fsynced once a second."""
    server = EmbeddedRedis(tmp_path / "external", "fast")
    yield server.start()
    server.stop()


PROBE = "wlmtest:durability:probe"
# An insert of nothing, which the scripts stand-in answers without Redis.
INSERT = INSERT_SPEC(["key"] * 8, ["channel", "wake", 60, 10, 0, 0], key_groups=[[], []], arg_groups=[[], [], []])
STRICT_CONFIG = {"appendonly": "yes", "appendfsync": "always", "no-appendfsync-on-rewrite": "no"}


class OlderRedis:
    """The answers of a Redis without WAITAOF (before 7.2), as far as the startup check asks."""

    def __init__(self, config: dict[str, str] | None) -> None:
        self.config = config  # None: CONFIG refused, as managed services do
        self.written: list[str] = []
        self.connection_pool = SimpleNamespace(connection_kwargs={"host": "older", "port": 6379})

    async def info(self, section: str) -> dict[str, Any]:
        assert section == "replication"
        return {"role": "master", "connected_slaves": 0}

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
        assert not (await durability_of(redis, "fast", PROBE, 1000)).waitaof
    async with Redis.from_url(redis_url) as redis:  # the tests' embedded Redis, strict by default
        await durability_of(redis, "strict", PROBE, 1000)


async def test_strict_reads_the_configuration_where_it_can(caplog):
    """appendfsync always, with no pause during rewrites, is on disk before each reply; nothing else is strict, not
    even where WAITAOF exists (with everysec some servers confirm fsyncs they have not done)."""
    assert not (await durability_of(OlderRedis(STRICT_CONFIG), "strict", PROBE, 1000)).waitaof  # type: ignore[arg-type]
    with pytest.raises(NotDurable, match="appendonly no, appendfsync everysec"):
        await durability_of(OlderRedis(STRICT_CONFIG | {"appendonly": "no", "appendfsync": "everysec"}), "strict", PROBE, 1000)  # type: ignore[arg-type]
    with pytest.raises(NotDurable, match="no-appendfsync-on-rewrite yes"):
        await durability_of(OlderRedis(STRICT_CONFIG | {"no-appendfsync-on-rewrite": "yes"}), "strict", PROBE, 1000)  # type: ignore[arg-type]
    unverifiable = OlderRedis(None)
    with caplog.at_level(logging.WARNING, logger="app.redis.durability"):
        assert not (await durability_of(unverifiable, "strict", PROBE, 1000)).waitaof  # type: ignore[arg-type]
    assert "cannot be verified" in caplog.text and unverifiable.written == [PROBE]


async def test_strict_where_config_is_refused_uses_waitaof_if_it_confirms_a_write():
    confirming = WaitaofRedis(1)
    assert (await durability_of(confirming, "strict", PROBE, 1000)).waitaof  # type: ignore[arg-type]
    assert confirming.written == [PROBE]  # a write of its own: WAITAOF on a connection without one answers at once
    with pytest.raises(NotDurable, match="does not confirm"):
        await durability_of(WaitaofRedis(0), "strict", PROBE, 1000)  # type: ignore[arg-type]
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
            request = NewRequest(uuid.uuid4().hex, "ONLINE", False, RequestMeta({"sc": "ONLINE"}), "{}", None)
            assert await store.insert(AeKeys("wlm", "LOCAL", "PAYROLL"), 1, [request], 10) == [request.id]
    finally:
        server.stop()
    assert len(confirmed_on) == 1 and inserted_on == confirmed_on


class WrittenScripts:
    """The scripts, as far as a durability that has nothing to confirm calls them."""

    async def run(self, call: ScriptCall) -> list[Any]:
        return ["written"]


async def test_a_redis_that_does_not_answer_at_start_is_checked_at_the_first_insert(redis_url):
    """The service starts without Redis (not ready, /readyz says why); strict mode is then checked when work comes."""
    unreachable = Redis.from_url("redis://127.0.0.1:1/0", decode_responses=True)
    deferred = await durability.durability_at_start(unreachable, "strict", PROBE, 1000)
    await unreachable.aclose()
    assert isinstance(deferred, durability.DeferredDurability)
    refusing = OlderRedis(STRICT_CONFIG | {"appendfsync": "everysec"})
    with pytest.raises(ServiceUnavailable, match="appendfsync everysec") as refused:
        await deferred.run(WrittenScripts(), refusing, INSERT)  # type: ignore[arg-type]
    assert refused.value.code == "not_durable"
    accepting = durability.DeferredDurability("strict", PROBE, 1000)
    written = await accepting.run(WrittenScripts(), OlderRedis(STRICT_CONFIG), INSERT)  # type: ignore[arg-type]
    assert written == ["written"]


@pytest.fixture
def replicated(tmp_path) -> Iterator[tuple[str, Replica]]:
    """A Redis of its own that fsyncs before it replies (as strict mode asks), and a replica of it."""
    master = EmbeddedRedis(tmp_path / "master")
    url = master.start()
    try:
        with replica_of(tmp_path / "replica", url) as replica:
            yield url, replica
    finally:
        master.stop()


def _queued_on(url: str, settings: Settings) -> int:
    with redis.Redis.from_url(url) as client:
        return int(client.hlen(AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL").payload))


async def test_a_strict_insert_is_answered_once_a_replica_has_it(settings, replicated, redis_admin, caplog):
    """The replica promoted when a master dies has only what it received: a strict 201 waits for it (WAIT). With
    the replica stopped, the insert is answered 503 not_durable; sent again with its idempotency key once the
    replica is back, it is answered 201 with the same request, queued once. A replica gone for good is noticed,
    and inserts are then answered on the master's disk alone."""
    master_url, replica = replicated
    async with running_app(settings.model_copy(update={"redis_url": master_url, "replica_wait_ms": 1000})) as app, client_of(app) as client:
        world = await make_world(client)
        await world.insert({"n": 1})
        assert _queued_on(replica.url, settings) == 1  # at the 201, the replica has it

        replica.process.send_signal(signal.SIGSTOP)
        try:
            refused = await world.insert({"n": 2}, idempotency_key="second", expect=503)
            assert refused["error"]["code"] == "not_durable"
            assert _queued_on(master_url, settings) == 2  # queued on the master, not yet promised
            # Meanwhile the master's inserts are refused at once, before anything is queued.
            assert (await world.insert({"n": 3}, expect=503))["error"]["code"] == "not_durable"
            assert _queued_on(master_url, settings) == 2
        finally:
            replica.process.send_signal(signal.SIGCONT)
        again = await world.insert_until_accepted({"n": 2}, idempotency_key="second")
        assert _queued_on(replica.url, settings) == 2
        assert again["token"] == (await world.insert_until_accepted({"n": 2}, idempotency_key="second"))["token"]
        with redis.Redis.from_url(master_url, decode_responses=True) as master:
            assert master.hget(AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL").depth, "ONLINE") == "2"  # queued once

        replica.process.kill()
        replica.process.wait()
        caplog.set_level(logging.WARNING, logger="app.redis.durability")
        await world.insert_until_accepted({"n": 4})
        assert "has no replica online" in caplog.text


async def test_an_insert_waiting_for_its_replica_holds_up_no_other_call(settings, replicated):
    """The WAIT holds its connection until the replica answers: the selects and ends go on meanwhile."""
    master_url, replica = replicated
    patient = settings.model_copy(update={"redis_url": master_url, "replica_wait_ms": 4000})
    async with running_app(patient) as app, client_of(app) as client:
        world = await make_world(client)
        server = await world.server()
        first = await world.insert({"n": 1})
        replica.process.send_signal(signal.SIGSTOP)
        try:
            body = {"connect_token": world.qm_token, "application_environment": "PAYROLL", "classification": ONLINE, "payload": 2}
            waiting = asyncio.create_task(client.post("/v1/work", headers=world.qm, json=body))
            await eventually(lambda: _queued_on(master_url, settings) == 2, 10, what="the second insert queued on the master")
            selected = (await world.select(server)).json()["items"]
            assert [item["token"] for item in selected] == [first["token"]] and not waiting.done()
        finally:
            replica.process.send_signal(signal.SIGCONT)
        # 201 once the replica has it (503 if this machine took longer than the wait): queued once either way.
        assert (await asyncio.wait_for(waiting, 30)).status_code in (201, 503)
        with redis.Redis.from_url(master_url, decode_responses=True) as master:
            k = AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL")
            assert master.hget(k.depth, "ONLINE") == "1" and master.llen(k.front("ONLINE:ind")) == 1


async def test_strict_mode_on_a_redis_that_refuses_info_and_config(settings, tmp_path, caplog):
    """An ACL that denies INFO and CONFIG (as managed services do): replicas cannot be counted, so inserts are not
    held for them, with a warning; they are answered, not failed."""
    server = EmbeddedRedis(tmp_path / "guarded")
    url = server.start()
    try:
        with redis.Redis.from_url(url) as admin:
            denied = ["+@all", "-info", "-config"]
            admin.acl_setuser("wlm", enabled=True, passwords=["+secret"], keys=["*"], channels=["*"], commands=denied)
        guarded = url.replace("redis://", "redis://wlm:secret@")
        caplog.set_level(logging.WARNING, logger="app.redis.durability")
        async with running_app(settings.model_copy(update={"redis_url": guarded})) as app, client_of(app) as client:
            world = await make_world(client)
            await world.insert({"n": 1})
        assert "refuses INFO" in caplog.text
    finally:
        server.stop()


async def test_fast_mode_does_not_wait_for_a_replica(settings, replicated):
    master_url, replica = replicated
    fast = settings.model_copy(update={"redis_url": master_url, "durability": "fast", "replica_wait_ms": 300})
    async with running_app(fast) as app, client_of(app) as client:
        world = await make_world(client)
        replica.process.send_signal(signal.SIGSTOP)
        try:
            await world.insert({"n": 1})
        finally:
            replica.process.send_signal(signal.SIGCONT)


async def test_a_master_refusing_writes_for_want_of_replicas_is_answered_503(settings, tmp_path):
    """Redis's own `min-replicas-to-write`, where a user wants no write with fewer replicas: NOREPLICAS is an
    outage of the queue (503, retry), not a fault of the service (500)."""
    server = EmbeddedRedis(tmp_path / "guarded")
    url = server.start()
    try:
        async with running_app(settings.model_copy(update={"redis_url": url})) as app, client_of(app) as client:
            world = await make_world(client)
            with redis.Redis.from_url(url) as admin:
                admin.config_set("min-replicas-to-write", 1)
            refused = await world.insert({"n": 1}, expect=503)
            assert refused["error"]["code"] == "redis_unavailable"
    finally:
        server.stop()
