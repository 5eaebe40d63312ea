"""The scheduler election on a real Redis: members as separate SchedulerMember objects with short intervals, as
separate replicas would be; their duties are recorded instead of run."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError
from redis.asyncio import Redis

from app.config import Settings
from app.errors import Conflict
from app.events.advisories import events_key
from app.queues.base import AeConfig
from app.queues.store import QueueStore
from app.redis.topology import close_redis, is_cluster, open_redis
from app.scheduler.service import SchedulerMember, scheduler_status
from tests.conftest import ADMIN_KEY, bearer
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both
from tests.waiting import eventually

HEARTBEAT, ACTIVATION = 0.1, 0.5


def store_of(redis: Redis, prefix: str) -> QueueStore:
    return QueueStore(redis, prefix, idempotency_ttl_s=60, tombstone_ms=60_000, samples_ms=60_000)


class Replica:
    """One member and a record of its duty starts and stops."""

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.log: list[tuple[str, int | None]] = []
        self.member = SchedulerMember(store_of(redis, settings.redis_prefix).context, settings, self._active, self._inactive)

    async def _active(self, epoch: int) -> None:
        self.log.append(("active", epoch))

    async def _inactive(self) -> None:
        self.log.append(("inactive", None))


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = await open_redis(redis_url, await is_cluster(redis_url), max_connections=20)
    yield client
    await close_redis(client)


@pytest.fixture
def prefix() -> str:
    return f"wlmtest{uuid.uuid4().hex[:8]}"


def settings_of(prefix: str, tmp_path: Path, weight: int = 50) -> Settings:
    return Settings(
        data_dir=tmp_path,
        redis_url="redis://unused",
        redis_prefix=prefix,
        scheduler_weight=weight,
        scheduler_heartbeat_seconds=HEARTBEAT,
        scheduler_activation_seconds=ACTIVATION,
    )


async def until(check: Callable[[], bool], timeout: float = 5.0) -> float:
    """Seconds until `check()` holds, polled often: some tests measure how soon."""
    started = time.monotonic()
    await eventually(check, timeout, interval=0.01)
    return time.monotonic() - started


async def test_one_member_holds_the_role_and_a_second_waits(redis: Redis, prefix: str, tmp_path: Path) -> None:
    first, second = Replica(redis, settings_of(prefix, tmp_path)), Replica(redis, settings_of(prefix, tmp_path))
    await first.member.start()
    await second.member.start()
    try:
        assert first.member.active and first.member.epoch == 1 and first.member.may_act()
        assert not second.member.active and not second.member.may_act()
        # A while in which nothing may happen: five heartbeats, and the second takes no role from the first.
        await asyncio.sleep(5 * HEARTBEAT)
        assert second.log == [] and first.log == [("active", 1)]
        holder, members = await scheduler_status(store_of(redis, prefix).context)
        assert holder["member"] == first.member.name and holder["epoch"] == "1"
        assert {m.member for m in members} == {first.member.name, second.member.name}
    finally:
        await first.member.stop()
        await second.member.stop()


async def test_a_silent_scheduler_is_replaced_within_the_activation_interval_and_fenced(redis: Redis, prefix: str, tmp_path: Path) -> None:
    first, second = Replica(redis, settings_of(prefix, tmp_path)), Replica(redis, settings_of(prefix, tmp_path))
    await first.member.start()
    await second.member.start()
    # The first falls silent as a killed or paused process does: no heartbeat, no resignation.
    assert first.member._task is not None
    first.member._task.cancel()
    silent_since = time.monotonic()
    await until(lambda: second.member.active)
    takeover = time.monotonic() - silent_since
    assert takeover <= ACTIVATION + 2 * HEARTBEAT + 0.5, takeover
    assert second.member.epoch == 2 and second.log == [("active", 2)]
    # The silent one believes nothing after the activation interval: it may not act, though it was not told.
    assert first.member.active and not first.member.may_act()
    # When it wakes up, its heartbeat deposes it.
    election = await first.member.beat()
    assert election is not None and election.holder == second.member.name and election.outcome == "standby"
    assert not first.member.active and first.log == [("active", 1), ("inactive", None)]
    await first.member.stop()
    await second.member.stop()


async def test_the_highest_weight_wins_and_a_heavier_member_takes_over(redis: Redis, prefix: str, tmp_path: Path) -> None:
    light, heavy = Replica(redis, settings_of(prefix, tmp_path, weight=10)), Replica(redis, settings_of(prefix, tmp_path, weight=90))
    await light.member.start()
    assert light.member.active
    await heavy.member.start()
    await until(lambda: heavy.member.active and len(light.log) == 2)
    assert heavy.member.epoch == 2
    assert light.log == [("active", 1), ("inactive", None)]
    await heavy.member.stop()
    # A holder that stops resigns: the other takes over at its next heartbeat, not after the activation interval.
    assert await until(lambda: light.member.active) < ACTIVATION
    assert light.member.epoch == 3
    await light.member.stop()


async def test_at_no_time_two_members_act(redis: Redis, prefix: str, tmp_path: Path) -> None:
    replicas = [Replica(redis, settings_of(prefix, tmp_path, weight=w)) for w in (30, 30, 30)]
    for replica in replicas:
        await replica.member.start()
    overlaps = 0
    for round_ in range(6):
        holder = next(r for r in replicas if r.member.active)
        assert holder.member._task is not None
        holder.member._task.cancel()  # silent
        deadline = time.monotonic() + ACTIVATION + 0.5
        while time.monotonic() < deadline:  # sampled through the whole hand-over: no moment with two acting
            overlaps += sum(r.member.may_act() for r in replicas) > 1
            await asyncio.sleep(0.01)
        await holder.member.beat()  # wakes up: deposed
        holder.member._task = asyncio.create_task(holder.member._beating())
        assert sum(r.member.active for r in replicas) == 1, round_
    assert overlaps == 0
    epochs = [event for r in replicas for event in r.log if event[0] == "active"]
    assert sorted(epoch for _, epoch in epochs) == list(range(1, len(epochs) + 1))  # every epoch held once
    for replica in replicas:
        await replica.member.stop()


async def test_the_advisories_name_each_change(redis: Redis, prefix: str, tmp_path: Path) -> None:
    first = Replica(redis, settings_of(prefix, tmp_path))
    await first.member.start()
    await first.member.stop()
    subjects = [fields["subject"] for _, fields in await redis.xrange(events_key(prefix))]
    assert subjects == [f"WLM.INFO.SCHEDULER.ACTIVE.{first.member.name}", f"WLM.INFO.SCHEDULER.INACTIVE.{first.member.name}"]


def test_the_heartbeat_must_be_shorter_than_the_activation_interval(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="shorter than scheduler_activation_seconds"):
        Settings(data_dir=tmp_path, scheduler_heartbeat_seconds=2, scheduler_activation_seconds=2)


async def test_get_scheduler_shows_this_process_as_the_holder(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/scheduler", headers=bearer(ADMIN_KEY))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["holder"] == body["this_process"] and body["epoch"] == 1
    assert [m["live"] for m in body["members"]] == [True]


async def test_a_deposed_schedulers_reassign_is_fenced(app: FastAPI) -> None:
    state = app.state.wlm
    keys = state.queues.keys("LOCAL", "PAYROLL")
    config = AeConfig(class_order=("SYSOTHER",), completion_time_ms=1000, backlog_limit=10, max_deliveries=3)
    assert (await state.queues.reassign(keys, config, epoch=2)).requeued == 0
    with pytest.raises(Conflict) as refused:
        await state.queues.reassign(keys, config, epoch=1)
    assert refused.value.code == "fenced" and refused.value.details["epoch"] == 2
    # Not a scheduler's duty (a server's own disconnect): not fenced.
    assert (await state.queues.reassign(keys, config)).requeued == 0


async def test_duties_that_failed_to_start_are_started_at_the_next_heartbeat(redis: Redis, prefix: str, tmp_path: Path) -> None:
    replica = Replica(redis, settings_of(prefix, tmp_path))
    failures = [RuntimeError("the record writer did not start")]

    async def flaky_start(epoch: int) -> None:
        if failures:
            raise failures.pop()
        replica.log.append(("active", epoch))

    replica.member.on_active = flaky_start
    await replica.member.start()
    # The role is held, but not taken up: no duties, and the member may not act.
    assert not replica.member.active and not replica.member.may_act() and replica.log == [("inactive", None)]
    await until(lambda: replica.member.active)
    assert replica.log == [("inactive", None), ("active", 1)] and replica.member.may_act()
    await replica.member.stop()


async def test_a_member_replaced_while_its_duties_start_does_not_announce_its_older_epoch(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    slow, other = Replica(redis, settings_of(prefix, tmp_path)), Replica(redis, settings_of(prefix, tmp_path))
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow_start(epoch: int) -> None:
        # The duties take longer to start than the activation interval, as on a loaded host.
        slow.log.append(("active", epoch))
        started.set()
        await release.wait()

    slow.member.on_active = slow_start
    taking_up = asyncio.create_task(slow.member.start())
    await asyncio.wait_for(started.wait(), 5)
    await other.member.start()
    # The other takes the next epoch once the slow one has been silent for the activation interval.
    await until(lambda: other.member.epoch == 2)
    release.set()
    await taking_up
    assert not slow.member.active and slow.log == [("active", 1), ("inactive", None)]
    await slow.member.stop()
    await other.member.stop()
    advisories = [fields for _, fields in await redis.xrange(events_key(prefix))]
    announced = [fields["subject"] for fields in advisories if ".ACTIVE." in fields["subject"]]
    # Only the epoch that was taken up is announced: no ACTIVE of epoch 1 after epoch 2's.
    assert announced == [f"WLM.INFO.SCHEDULER.ACTIVE.{other.member.name}"]
