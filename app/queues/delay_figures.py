"""What the elected scheduler's delay samples read of one environment on one node (lua/delay_figures.lua): one
read-only script call, none of the insert or select path's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.queues import script_specs as specs
from app.queues.base import StorePart
from app.queues.keys import AeKeys, queue_name

# Entries looked at per front list for the requests given back at its head: beyond them, the rest count as new.
REDELIVERED_SCAN = 64
# Held requests read per sample for their class periods, at most: a batched load holds thousands, and reading every
# one each tick made the sampling's cost grow with them (issues 37, 39). Beyond it, a random sample's counts are scaled
# to all held: unbiased, with a standard error of at most held / (2 * sqrt(HELD_SAMPLE)), i.e. 3 % of the held requests
# (less as the sample nears them all: exact when no more are held). A class period with a share p of them is missing
# from one sample with a chance of (1 - p) ** HELD_SAMPLE (7.6 % at p = 1 %); over a minute's samples it shows.
HELD_SAMPLE = 256


@dataclass(frozen=True, slots=True)
class DelayFigures:
    """One environment on one node as of `now_ms` (Redis's clock): its servers registered, their worker tasks, the
    requests they hold and the servers the manager wants (0 before its first decision); per class, requests queued
    (in memory and swept) and those of them redelivered (at most REDELIVERED_SCAN per queue); requests held per class
    period (counted in at most HELD_SAMPLE of them, scaled)."""

    now_ms: int
    servers: int
    worker_tasks: int
    held: int
    wanted: int
    queued: dict[str, int]
    redelivered: dict[str, int]
    held_by_period: dict[tuple[str, int], int]


def period_ends(durations: Sequence[int | None]) -> str:
    """Where each period but the last ends, in ms since insert, as the script takes them (pure): period_number's
    boundaries (spark_jobs/manager/goals.py), up to the first open-ended period."""
    ends, boundary = [], 0
    for duration in durations[:-1]:
        if duration is None:
            break
        boundary += duration
        ends.append(str(boundary))
    return ",".join(ends)


class DelayReads(StorePart):
    async def figures(self, k: AeKeys, classes: Sequence[tuple[str, str]]) -> DelayFigures:
        """`classes`: the environment's service classes, each with its period_ends."""
        names = [name for name, _ in classes]
        fronts = [k.front(queue_name(name, dependent)) for name in names for dependent in (True, False)]
        keys = [k.req, k.servers, k.inflight, k.desired, k.depth, k.leases]
        call = specs.DELAY_FIGURES(keys, [REDELIVERED_SCAN, HELD_SAMPLE], key_groups=[fronts], arg_groups=[[v for c in classes for v in c]])
        now, servers, tasks, held, wanted, depth, by_period, *redelivered = await self.scripts.run(call)
        periods = {}
        for field, count in zip(by_period[::2], by_period[1::2], strict=True):
            name, _, period = str(field).rpartition("|")
            periods[(name, int(period))] = int(count)
        return DelayFigures(
            now_ms=int(now),
            servers=int(servers),
            worker_tasks=int(tasks),
            held=int(held),
            wanted=int(wanted),
            queued={sc: int(n) for sc, n in zip(depth[::2], depth[1::2], strict=True)},
            redelivered={name: int(n) for name, n in zip(names, redelivered, strict=True)},
            held_by_period=periods,
        )
