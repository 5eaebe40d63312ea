"""One rule, two runners: the same cases through the select script on a real Redis (QueueStore.select) and through
the pure select order (spark_jobs/manager/select_order.py) the what-if simulation uses, which must take the same
requests in the same order, promoting the same one: importance order, the home class first within its tier, a full
resource group passed over, a group under its minimum first, dependent before independent, FIFO, and promotion of
blocked work (by the longest wait past the promotion time, not for a class at its cap, not without a token)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

import pytest

from app.queues.base import AeConfig, GroupCap
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from spark_jobs.manager.select_order import (
    Promotion,
    PromotionBucket,
    Queued,
    RankedClass,
    granted_slots,
    look_order,
    preferred_order,
    select,
)
from tests.queues.conftest import OTHER_SERVER, QUEUE_MANAGER, SERVER, request

# Requests queued for less than this are never promoted: a case's "fresh" ones were inserted moments before.
PROMOTION_MS = 60_000
SHARE = 0.1


@dataclass(frozen=True)
class Work:
    service_class: str
    dependent: bool = False
    age_ms: int = 0  # how long before the select it was inserted (its insert time moved back by this much)


@dataclass(frozen=True)
class Case:
    classes: tuple[tuple[str, int, str | None], ...]  # in the policy's order: name, importance rank, group
    queued: tuple[Work, ...]  # in insertion order
    want: int
    home: str | None = None
    groups: dict[str, GroupCap] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)  # per class, requests another server holds (its group's count)
    tokens: float = 1.0  # the promotion bucket's before the select


def fresh(service_class: str, count: int = 1, *, dependent: bool = False) -> tuple[Work, ...]:
    return tuple(Work(service_class, dependent) for _ in range(count))


def old(service_class: str, age_ms: int, *, dependent: bool = False) -> Work:
    return Work(service_class, dependent, age_ms)


CASES = {
    "importance order": Case((("A", 1, None), ("B", 2, None), ("C", 3, None)), fresh("C", 2) + fresh("B", 2) + fresh("A"), want=4),
    "home first within its tier": Case(
        (("A", 1, None), ("B", 2, None), ("C", 2, None), ("D", 3, None)),
        fresh("D") + fresh("C") + fresh("B") + fresh("A"),
        want=3,
        home="C",
    ),
    "a home never before a more important class": Case(
        (("A", 1, None), ("B", 2, None), ("C", 3, None)), fresh("C", 2) + fresh("B") + fresh("A"), want=3, home="C"
    ),
    "a full group passed over": Case(
        (("A", 1, "CAPPED"), ("B", 2, None)),
        fresh("A", 2) + fresh("B", 2),
        want=3,
        groups={"CAPPED": GroupCap("CAPPED", max_in_flight=2, min_in_flight=None)},
        held={"A": 2},
    ),
    "a group gives no more than its cap leaves": Case(
        (("A", 1, "CAPPED"), ("B", 2, None)),
        fresh("A", 3) + fresh("B", 3),
        want=4,
        groups={"CAPPED": GroupCap("CAPPED", max_in_flight=3, min_in_flight=None)},
        held={"A": 2},
    ),
    "a group under its minimum first in its importance": Case(
        (("A", 1, None), ("B", 2, None), ("C", 2, "FLOOR")),
        fresh("B", 2) + fresh("C", 2),
        want=3,
        groups={"FLOOR": GroupCap("FLOOR", max_in_flight=None, min_in_flight=2)},
        held={"C": 1},
    ),
    "dependent before independent, each FIFO": Case(
        (("A", 1, None),), fresh("A") + fresh("A", dependent=True) + fresh("A") + fresh("A", dependent=True) + fresh("A"), want=4
    ),
    "FIFO": Case((("A", 1, None), ("B", 2, None)), fresh("A", 5) + fresh("B", 2), want=3),
    "the longest blocked is promoted": Case(
        (("A", 1, None), ("B", 2, None), ("C", 3, None)),
        (old("B", 100_000), old("C", 200_000), *fresh("A", 3), old("C", 150_000, dependent=True)),
        want=3,
    ),
    "a blocked class at its cap is not promoted": Case(
        (("A", 1, None), ("B", 2, None), ("C", 3, "CAPPED")),
        (old("B", 100_000), old("C", 200_000), *fresh("A", 3)),
        want=2,
        groups={"CAPPED": GroupCap("CAPPED", max_in_flight=1, min_in_flight=None)},
        held={"C": 1},
    ),
    "no promotion without a whole token": Case((("A", 1, None), ("B", 2, None)), (old("B", 100_000), *fresh("A", 3)), want=2, tokens=0.5),
    "nothing blocked long enough": Case((("A", 1, None), ("B", 2, None)), (old("B", 30_000), *fresh("A", 3)), want=2),
}


def random_case(seed: int) -> Case:
    """A case drawn from `seed`: two to four classes of importance 1-2 (so that tiers are shared), perhaps a resource
    group with a cap or a minimum and some of it held, work of every kind and age, a home, a bucket full or not."""
    rng = random.Random(seed)
    names = ["A", "B", "C", "D"][: rng.randint(2, 4)]
    ranks = sorted(rng.randint(1, 2) for _ in names)
    groups: dict[str, GroupCap] = {}
    grouped: set[str] = set()
    if rng.random() < 0.6:
        cap = rng.choice([None, 1, 2, 3])
        groups["G"] = GroupCap("G", max_in_flight=cap, min_in_flight=rng.choice([None, 2, 4]))
        grouped = set(rng.sample(names, rng.randint(1, len(names) - 1)))
    held = {}
    if grouped and rng.random() < 0.5:
        cap = groups["G"].max_in_flight
        held[rng.choice(sorted(grouped))] = rng.randint(1, cap if cap is not None else 3)
    queued = tuple(
        Work(rng.choice(names), rng.random() < 0.3, rng.choice([0, 0, rng.randint(70_000, 400_000)])) for _ in range(rng.randint(2, 12))
    )
    return Case(
        tuple((name, rank, "G" if name in grouped else None) for name, rank in zip(names, ranks, strict=True)),
        queued,
        want=rng.randint(1, 5),
        home=rng.choice([None, *names, *names]),
        groups=groups,
        held=held,
        tokens=rng.choice([1.0, 1.0, 0.5]),
    )


@pytest.fixture
def promoting(store: QueueStore) -> QueueStore:
    store.promotion_ms = PROMOTION_MS
    store.promotion_share = SHARE
    return store


async def _set_up(store: QueueStore, k: AeKeys, case: Case, config: AeConfig) -> dict[tuple[str, bool], list[tuple[str, int]]]:
    """The case's state in Redis; returns each queue's requests (id, insert time), oldest first."""
    await store.register_server(k, SERVER, worker_tasks=100, worker_weight=1, overflow=False)
    await store.register_server(k, OTHER_SERVER, worker_tasks=100, worker_weight=1, overflow=False)
    held = [request(name) for name, count in case.held.items() for _ in range(count)]
    if held:
        await store.insert(k, QUEUE_MANAGER, held, 10**6)
        taken = await store.select(k, config, OTHER_SERVER, len(held), begin=True)
        assert len(taken.items) == len(held)
    await store.redis.delete(k.promotion)  # the other server's select looked: the case starts from its own bucket
    if case.tokens != 1.0:
        await store.redis.hset(k.promotion, "tokens", case.tokens)
    if case.home is not None:
        await store.results.publish_decision(k, {SERVER: case.home}, [], {})
    requests = [request(work.service_class, dependent=work.dependent) for work in case.queued]
    ids = await store.insert(k, QUEUE_MANAGER, requests, 10**6) if requests else []
    queues: dict[tuple[str, bool], list[tuple[str, int]]] = {}
    for work, request_id in zip(case.queued, ids, strict=True):
        meta = json.loads(await store.redis.hget(k.req, request_id))
        meta["inserted"] -= work.age_ms  # as if inserted that long ago
        await store.redis.hset(k.req, request_id, json.dumps(meta))
        queues.setdefault((work.service_class, work.dependent), []).append((request_id, meta["inserted"]))
    return queues


def _pure_choices(case: Case, queues: dict[tuple[str, bool], list[tuple[str, int]]], now_ms: int) -> tuple[list[tuple[str, bool]], float]:
    """The requests the pure select order takes (id, promoted), and the bucket's tokens after."""
    group_of = {name: group for name, _, group in case.classes if group is not None}
    in_flight = {group: sum(case.held.get(name, 0) for name, g in group_of.items() if g == group) for group in case.groups}
    under = {name for name, g in case.groups.items() if g.min_in_flight is not None and in_flight[name] < g.min_in_flight}
    order = look_order(preferred_order([RankedClass(*c) for c in case.classes], under), case.home)
    queued = {}
    for name, _, _ in case.classes:
        dependent, independent = queues.get((name, True), []), queues.get((name, False), [])
        heads = [queue[0][1] for queue in (dependent, independent) if queue]
        queued[name] = Queued(len(dependent), len(independent), min(heads) if heads else None)
    slots = {name: granted_slots(case.want, g.max_in_flight, in_flight[name]) for name, g in case.groups.items()}
    selection = select(
        order,
        queued,
        want=case.want,
        now_ms=now_ms,
        bucket=PromotionBucket(tokens=case.tokens),
        promotion=Promotion(PROMOTION_MS, SHARE),
        group_of=group_of,
        slots=slots,
    )
    fronts = {queue: [request_id for request_id, _ in requests] for queue, requests in queues.items()}
    choices = []
    for take in selection.takes:
        front = fronts[(take.service_class, take.dependent)]
        choices += [(front.pop(0), take.promoted) for _ in range(take.count)]
    return choices, selection.bucket.tokens


async def _both(store: QueueStore, k: AeKeys, case: Case) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]], float, float]:
    config = AeConfig(
        class_order=tuple(name for name, _, _ in case.classes),
        completion_time_ms=30_000,
        backlog_limit=10**6,
        max_deliveries=2,
        class_ranks=tuple(rank for _, rank, _ in case.classes),
        class_groups=tuple(case.groups[group] if group is not None else None for _, _, group in case.classes),
    )
    queues = await _set_up(store, k, case, config)
    now_ms = await store.clock_ms()
    result = await store.select(k, config, SERVER, case.want, begin=False)
    script = [(item.id, bool(item.meta.get("promoted"))) for item in result.items]
    tokens = float(await store.redis.hget(k.promotion, "tokens") or 1.0)
    pure, pure_tokens = _pure_choices(case, queues, now_ms)
    return script, pure, tokens, pure_tokens


# What the script takes in each named case, by class ("/dep": dependent; "/promoted"), so that none is vacuous.
EXPECTED = {
    "importance order": ["A", "B", "B", "C"],
    "home first within its tier": ["A", "C", "B"],
    "a home never before a more important class": ["A", "B", "C"],
    "a full group passed over": ["B", "B"],
    "a group gives no more than its cap leaves": ["A", "B", "B", "B"],
    "a group under its minimum first in its importance": ["C", "C", "B"],
    "dependent before independent, each FIFO": ["A/dep", "A/dep", "A", "A"],
    "FIFO": ["A", "A", "A"],
    "the longest blocked is promoted": ["C/dep/promoted", "A", "A"],
    "a blocked class at its cap is not promoted": ["B/promoted", "A"],
    "no promotion without a whole token": ["A", "A"],
    "nothing blocked long enough": ["A", "A"],
}


@pytest.mark.parametrize("name", list(CASES))
async def test_the_script_and_the_pure_select_order_take_the_same_requests(promoting: QueueStore, k: AeKeys, name: str) -> None:
    script, pure, tokens, pure_tokens = await _both(promoting, k, CASES[name])
    assert script == pure
    assert tokens == pytest.approx(pure_tokens)
    labels = []
    for request_id, promoted in script:
        meta = json.loads(await promoting.redis.hget(k.req, request_id))
        labels.append(meta["sc"] + ("/dep" if meta["dep"] else "") + ("/promoted" if promoted else ""))
    assert labels == EXPECTED[name]


@pytest.mark.parametrize("seed", range(60))
async def test_random_cases_agree(promoting: QueueStore, k: AeKeys, seed: int) -> None:
    script, pure, tokens, pure_tokens = await _both(promoting, k, random_case(seed))
    assert script == pure
    assert tokens == pytest.approx(pure_tokens)
