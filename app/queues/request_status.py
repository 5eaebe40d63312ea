"""A request's own status as the queues know it (lua/status.lua): one script call, and for a request in a swept
queue's blob one indexed read of the database and a second call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.queues import script_specs as specs
from app.queues.base import StorePart
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys
from app.queues.request_meta import RequestMeta


@dataclass(frozen=True, slots=True)
class ServerFigures:
    """What an environment's servers (on one node) are doing, as a queued request's status reads it."""

    connected: int  # registered
    worker_tasks: int  # theirs, in all
    held: int  # requests they hold (selected or begun)
    wanted: int  # the manager's latest decision, in all (0 before its first)
    # Looked at only while no worker task is free, for a class the call ranked: they hold work of a class of equal
    # or higher importance; of a less important class (the first found of the former ends the look).
    holding_equal_or_higher: bool
    holding_lower: bool

    @property
    def free_worker_tasks(self) -> int:
        return max(0, self.worker_tasks - self.held)


@dataclass(frozen=True, slots=True)
class LiveStatus:
    """Queued (in memory or swept), selected or begun."""

    now_ms: int  # Redis's clock
    meta: RequestMeta
    swept: bool  # queued in a blob in the database
    ahead: int | None  # while queued: the requests of its class queue ahead of it (None: not known)
    servers: ServerFigures
    performance: list[str]  # the environment's latest goal evaluation, JSON per class period


@dataclass(frozen=True, slots=True)
class DeadStatus:
    now_ms: int
    meta: RequestMeta
    reason: str


@dataclass(frozen=True, slots=True)
class EndedStatus:
    """Its tombstone, while it lives (lua/includes/finish.lua)."""

    now_ms: int
    outcome: str
    queue_manager: int | None  # None in a tombstone written before it was kept there


RequestStatus = LiveStatus | DeadStatus | EndedStatus


class RequestStatuses(StorePart):
    async def get(self, k: AeKeys, classes: Sequence[tuple[str, int]], request_id: str) -> RequestStatus | None:
        """What the queues know of a request (None: nothing, or its tombstone expired). `classes`: the environment's
        service classes, each with its tier (the policy's importance rank): a queued request's place in its class
        queue, and the importance of what the servers hold, are read for these."""
        flat = await self._status(k, classes, request_id, "")
        if int(flat[0]) == ReturnCode.UNKNOWN_WORK:
            if not int(flat[1]) or self.base.blobs is None:
                return None
            entry = await self.base.blobs.entry(k, request_id)
            if entry is None:
                return None
            flat = await self._status(k, classes, request_id, entry.meta)
            if int(flat[0]) == ReturnCode.UNKNOWN_WORK:
                return None
        return _status_of(flat[1:])

    async def _status(self, k: AeKeys, classes: Sequence[tuple[str, int]], request_id: str, swept_meta: str) -> list[Any]:
        keys = [k.req, *k.tombstone_keys, k.dead, k.swept, k.places, k.holes, k.servers, k.inflight, k.desired, k.performance, k.leases]
        names = [sc for sc, _ in classes]
        call = specs.STATUS(keys, [request_id, swept_meta], key_groups=[k.class_queues(names)], arg_groups=[names, [t for _, t in classes]])
        return await self.scripts.call(call)


def _status_of(flat: list[Any]) -> RequestStatus:
    kind, now_ms = str(flat[0]), int(flat[1])
    if kind == "ended":
        outcome, _, queue_manager = str(flat[2]).partition("|")
        return EndedStatus(now_ms, outcome, int(queue_manager) if queue_manager else None)
    if kind == "dead":
        return DeadStatus(now_ms, RequestMeta.from_json(flat[2]), str(flat[3]))
    meta, ahead, connected, tasks, held, wanted, higher, lower, *performance = flat[2:]
    servers = ServerFigures(int(connected), int(tasks), int(held), int(wanted), bool(int(higher)), bool(int(lower)))
    return LiveStatus(now_ms, RequestMeta.from_json(meta), kind == "swept", None if ahead is None else int(ahead), servers, performance)
