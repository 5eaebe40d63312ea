"""The state of an environment beside its queues: its servers' liveness, the limits IWM4SLI set, start errors
and terminations of its servers, the service classes in use, and its retirement once it left the policy."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

from app.queues import script_specs as specs
from app.queues.base import AeConfig, StorePart
from app.queues.keys import AeKeys, queue_name, retired_key, server_limits_key
from app.queues.performance import DESIRED_TOTAL
from app.queues.request_meta import RequestMeta, RetiredPlace

# The promotion hash's field of a class's promoted selects (PROMOTED_FIELD in lua/includes/promotion.lua) is this and the class.
PROMOTED_FIELD = "promoted|"


@dataclass(frozen=True, slots=True)
class Retired:
    """An environment removed while its queues may still hold something: the duties finish it (see Environments.retire)."""

    keys: AeKeys
    config: AeConfig
    queue_manager: int  # whose queued work is purged there
    since_ms: int
    member: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What an environment has on one node, as DISPLAY shows it."""

    servers: int  # registered
    in_flight: int  # requests held
    depths: dict[str, int]  # requests queued per service class
    performance: list[str]  # the latest goal evaluation's class periods (JSON each)
    start_error: str | None  # JSON


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """What /metrics shows of an environment on one node, as of `now_ms` on its queue node's clock: servers
    registered, requests held (in all and per class), dead letters kept, the latest decision's servers wanted and the latest evaluation
    (JSON per class period); per service class, requests queued, when the oldest queued in memory was inserted (None: none), and
    whether older requests are in the database (swept)."""

    now_ms: int
    servers: int
    in_flight: int
    dead_letters: int
    in_flight_by_class: dict[str, int]
    histograms: dict[str, int]  # lua/includes/end_held.lua `histograms`: '<class>|<period>|<r, q or e>|<bucket or sum>' -> count
    promoted: dict[str, int]  # selects that promoted a request of the class (starved_class in lua/includes/promotion.lua)
    desired: dict[str, int]
    performance: list[str]
    depths: dict[str, int]
    inserted_ms: dict[str, int | None]
    swept: set[str]


def promoted_counts(promotion: Mapping[str, str]) -> dict[str, int]:
    """The promoted selects per class, of the promotion hash's fields (beside the token bucket's own)."""
    return {field.removeprefix(PROMOTED_FIELD): int(n) for field, n in promotion.items() if field.startswith(PROMOTED_FIELD)}


class Environments(StorePart):
    async def unregister_server(self, k: AeKeys, server_id: int) -> None:
        """A server of an environment that left the policy: nothing it held can be requeued there, so it just goes,
        with what the environment kept about it."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in (k.servers, k.seen, k.inflight, k.served_at):
                pipe.hdel(key, str(server_id))
            await pipe.execute()

    async def registered_servers(self, k: AeKeys) -> dict[int, dict[str, Any]]:
        """The servers registered here: id -> their tasks, weight and whether they overflow."""
        return {int(sid): json.loads(raw) for sid, raw in (await self.redis.hgetall(k.servers)).items()}

    async def queue_depths(self, k: AeKeys) -> dict[str, int]:
        """Requests queued per service class (classes that queued here once may show 0)."""
        return {sc: int(depth) for sc, depth in cast(dict[str, str], await self.redis.hgetall(k.depth)).items()}

    async def activity(self, places: Sequence[AeKeys], since_ms: int) -> list[tuple[int, int]]:
        """Per environment and node, in one round trip: servers registered, and unexpected terminations since `since_ms`."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for k in places:
                pipe.hlen(k.servers)
                pipe.zcount(k.terminations, since_ms, "+inf")
            replies = await pipe.execute()
        return [(int(servers), int(terminations)) for servers, terminations in zip(replies[::2], replies[1::2], strict=True)]

    async def snapshots(self, places: Sequence[AeKeys], limits_of: Sequence[str]) -> tuple[list[Snapshot], list[str | None]]:
        """What each environment has on each node, and the limits IWM4SLI set for the environments `limits_of`
        (JSON, if any), in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for k in places:
                pipe.hlen(k.servers)
                pipe.hvals(k.inflight)
                pipe.hgetall(k.depth)
                pipe.hgetall(k.performance)
                pipe.get(k.start_error)
            for ae in limits_of:
                pipe.get(server_limits_key(self.prefix, ae))
            replies = await pipe.execute() if places or limits_of else []
        snapshots = []
        for index in range(len(places)):
            servers, held, depths, performance, start_error = replies[5 * index : 5 * index + 5]
            in_flight = sum(int(count) for count in held)
            snapshots.append(
                Snapshot(int(servers), in_flight, {sc: int(n) for sc, n in depths.items()}, list(performance.values()), start_error)
            )
        return snapshots, replies[5 * len(places) :]

    async def queue_figures(self, k: AeKeys, service_classes: Sequence[str]) -> QueueFigures:
        """One environment on one node, in one script call (the calls of one turn share a write)."""
        names = [queue_name(sc, dependent) for sc in service_classes for dependent in (True, False)]
        keys = [k.req, k.swept, k.servers, k.inflight, k.depth, k.desired, k.performance, k.dead_at, k.leases, k.histograms]
        keys.append(k.promotion)
        reply = await self.scripts.run(specs.QUEUE_FIGURES(keys, key_groups=[k.class_queues(list(service_classes))], arg_groups=[names]))
        now, servers, held, dead, depths, desired, performance, by_class, histograms, promotion, *oldest = reply
        return QueueFigures(
            now_ms=int(now),
            servers=int(servers),
            in_flight=int(held),
            dead_letters=int(dead),
            in_flight_by_class={sc: int(n) for sc, n in zip(by_class[::2], by_class[1::2], strict=True)},
            histograms={field: int(n) for field, n in zip(histograms[::2], histograms[1::2], strict=True)},
            promoted=promoted_counts(dict(zip(promotion[::2], promotion[1::2], strict=True))),
            desired={sc: int(n) for sc, n in zip(desired[::2], desired[1::2], strict=True) if sc != DESIRED_TOTAL},
            performance=list(performance),
            depths={sc: int(n) for sc, n in zip(depths[::2], depths[1::2], strict=True)},
            inserted_ms={sc: None if oldest[2 * i] is None else int(oldest[2 * i]) for i, sc in enumerate(service_classes)},
            swept={sc for i, sc in enumerate(service_classes) if int(oldest[2 * i + 1])},
        )

    async def promoted_selects(self, k: AeKeys) -> dict[str, int]:
        """Per service class, the selects that promoted one of its requests here (blocked workload promotion)."""
        return promoted_counts(cast(dict[str, str], await self.redis.hgetall(k.promotion)))

    async def silent_servers(self, k: AeKeys, silent_ms: int) -> list[int]:
        """Servers registered here that neither selected nor heartbeat for `silent_ms`."""
        seen = await self.redis.hgetall(k.seen)
        limit = await self.base.clock_ms(near=k.seen) - silent_ms
        return [int(sid) for sid, at in seen.items() if int(at) < limit]

    async def classes_in_use(self, k: AeKeys) -> set[str]:
        """Service classes with requests queued or held in this environment."""
        queued = {sc for sc, depth in cast(dict[str, str], await self.redis.hgetall(k.depth)).items() if int(depth) > 0}
        held_ids = cast(list[str], await self.redis.zrange(k.leases, 0, -1))
        metas = await self.redis.hmget(k.req, held_ids) if held_ids else []
        held = {RequestMeta.from_json(meta).service_class for meta in metas if meta}
        return queued | held

    async def retire_servers(self, k: AeKeys, server_ids: Sequence[int]) -> None:
        """Tell these servers to end at their next select (0C14), before the manager's next decision."""
        if server_ids:
            await self.redis.sadd(k.retire, *[str(server_id) for server_id in server_ids])

    async def record_termination(self, k: AeKeys, who: str, window_ms: int) -> tuple[float, list[float]]:
        """Count an unexpected termination now (`who`: a server id, or a launched process's instance, so that
        one process counts once); returns now and the times of those within the window (s, Redis's clock)."""
        now = await self.base.clock_ms()
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zadd(k.terminations, {who: now})
            pipe.zremrangebyscore(k.terminations, "-inf", now - window_ms)
            pipe.zrange(k.terminations, 0, -1, withscores=True)
            *_, recent = await pipe.execute()
        return now / 1000, [score / 1000 for _, score in recent]

    async def server_limits(self, ae: str) -> str | None:
        """The limits IWM4SLI set for an environment (JSON), if any."""
        return cast(str | None, await self.redis.get(server_limits_key(self.prefix, ae)))

    async def set_server_limits(self, ae: str, limits: str) -> None:
        await self.redis.set(server_limits_key(self.prefix, ae), limits)

    async def reset_server_limits(self, ae: str) -> bool:
        return bool(await self.redis.delete(server_limits_key(self.prefix, ae)))

    async def note_start_error(self, k: AeKeys, error: Mapping[str, Any], keep_s: int) -> None:
        await self.redis.set(k.start_error, json.dumps(error), ex=keep_s)

    async def clear_start_error(self, k: AeKeys) -> None:
        await self.redis.delete(k.start_error)

    async def retire(self, k: AeKeys, config: AeConfig, queue_manager: int) -> None:
        """Remember an environment that left (a dynamic one whose queue manager disconnected) until its queues are
        drained: the duties no longer find it in the policy, yet its records must be written, its exits called,
        held work ended or abandoned, and work a stale cache let in purged."""
        # json.dumps's spacing, as the members already retired have it: a place retired again is the same member.
        member = json.dumps(RetiredPlace.of(node=k.node, application_environment=k.ae, queue_manager=queue_manager))
        await self.redis.hset(retired_key(self.prefix), member, json.dumps({"config": asdict(config), "since": await self.base.clock_ms()}))

    async def retired(self) -> list[Retired]:
        result = []
        for member, value in cast(dict[str, str], await self.redis.hgetall(retired_key(self.prefix))).items():
            where, what = RetiredPlace.from_json(member), json.loads(value)
            config = what["config"] | {"class_order": tuple(what["config"]["class_order"])}
            keys = self.base.keys(where.node, where.application_environment)
            result.append(Retired(keys, AeConfig(**config), where.queue_manager, what["since"], member))
        return result

    async def drained(self, k: AeKeys) -> bool:
        """Nothing queued (in memory or swept) or held, no record to write, no exit to call."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hlen(k.req)
            pipe.hlen(k.swept)
            pipe.llen(k.records)
            pipe.zcard(k.exits)
            return not any(await pipe.execute())

    async def forget_retired(self, retired: Retired) -> None:
        await self.redis.hdel(retired_key(self.prefix), retired.member)
