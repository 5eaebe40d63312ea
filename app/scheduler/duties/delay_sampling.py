"""Delay samples, every WLM_SAMPLE_INTERVAL_MS: like RMF, the elected scheduler samples rather than traces. Each tick
it reads environments on their nodes (one read-only script call each, app/queues/delay_figures.py; the resource groups'
counts in one round trip; the environments' states from the operator's cache) and counts each class queue's requests
by state: served, or waiting by delay cause (app/servers/delay_samples.py). At most WLM_SAMPLE_PLACES_PER_TICK
environments are read per tick, the next ones at the next tick: with more, each is sampled less often, and its rows'
`samples` say so.

The counts stay in memory: per minute until the minute is over, then written once as Parquet rows and added to the
totals /metrics shows (app/servers/delay_records.py); per few seconds for the goal evaluation's window
(`window`). Nothing is shared with another scheduler: after a failover the new one starts counting afresh, so the
gap is missing samples, never zeros. What fails to be written is kept for the next minute's write; what a scheduler
that stops has counted is written at its stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from app.operator.service import state_in
from app.operator.states import holds_work_back
from app.policy.active import ActivePolicy
from app.queues.base import AeConfig
from app.queues.delay_figures import period_ends
from app.queues.keys import AeKeys
from app.scheduler.duties.context import DutyContext
from app.servers import delay_records
from app.servers.delay_samples import ClassPeriod, Counts, DelayBook, SampledClass, place_sample
from app.shared.repeated_failures import RepeatedFailures

log = logging.getLogger(__name__)
WRITE_AT_STOP_SECONDS = 10.0
# Rows kept while their writes fail (a full disk): beyond them, the oldest are dropped (their minutes then missing).
MAX_UNWRITTEN = 1_000_000
HOUR_MS = 3_600_000


class DelaySampling:
    def __init__(self, context: DutyContext) -> None:
        self.context = context
        settings = context.state.settings
        self.book = DelayBook(int(settings.goal_window_seconds * 1000))
        self._next = 0  # where the next tick's part of the environments begins
        self._policy: ActivePolicy | None = None
        self._places: list[tuple[AeKeys, AeConfig]] = []
        self._unwritten: list[delay_records.Row] = []
        self._untotalled: Counter[str] = Counter()
        self._failures = RepeatedFailures(log)
        self._classes: dict[tuple[int, str], tuple[list[tuple[str, str]], list[SampledClass]]] = {}
        self._compacted_hour: int | None = None  # the hour at whose start this scheduler last merged the minute files

    async def sample_delays(self) -> None:
        """The duty: one tick."""
        state = self.context.state
        policy = await state.policies.current()
        if policy is None:
            return
        if policy is not self._policy:  # the places of thousands of environments: listed again as the policy is read again
            self._policy, self._places = policy, await self.context.environments()
        places = self._part(self._places)
        if not places:
            return
        capped = await self._groups_at_cap([config for _, config in places])
        classes = [self._classes_of(policy, keys, config) for keys, config in places]
        reads = [state.queues.delays.figures(keys, read) for (keys, _config), (read, _known) in zip(places, classes, strict=True)]
        readings = await asyncio.gather(*reads)
        states = await state.operator.states()
        for (keys, _config), (_read, known), figures in zip(places, classes, readings, strict=True):
            sampled = [replace(c, group_at_cap=True) if c.name in capped else c for c in known]
            holds = holds_work_back(state_in(states, keys.ae, policy))
            self.book.add(figures.now_ms, keys.ae, keys.node, place_sample(figures, sampled, holds))
        await self.write(before_ms=max(figures.now_ms for figures in readings))

    def window(self, keys: AeKeys, now_ms: int) -> dict[ClassPeriod, Counts]:
        """The counts of an environment on a node over the goal window before `now_ms`."""
        return self.book.window(keys.ae, keys.node, now_ms)

    def _part(self, places: Sequence[tuple[AeKeys, AeConfig]]) -> list[tuple[AeKeys, AeConfig]]:
        """This tick's environments: all of them, or the next WLM_SAMPLE_PLACES_PER_TICK in turn."""
        limit = self.context.state.settings.sample_places_per_tick
        if len(places) <= limit:
            return list(places)
        first = self._next % len(places)
        self._next = first + limit
        return [places[(first + i) % len(places)] for i in range(limit)]

    def _classes_of(self, policy: ActivePolicy, keys: AeKeys, config: AeConfig) -> tuple[list[tuple[str, str]], list[SampledClass]]:
        """An environment's classes as its read takes them (with their period ends) and as its sample does (the
        group's cap aside), kept per policy version."""
        known = self._classes.get((policy.version, keys.ae))
        if known is None:
            if len(self._classes) > 10_000:
                self._classes.clear()
            periods = [policy.service_classes[name].periods for name in config.class_order]
            known = (
                [(name, period_ends([p.duration_ms for p in ps])) for name, ps in zip(config.class_order, periods, strict=True)],
                [
                    SampledClass(name, tier, len(ps), False)
                    for name, tier, ps in zip(config.class_order, config.tiers, periods, strict=True)
                ],
            )
            self._classes[(policy.version, keys.ae)] = known
        return known

    async def _groups_at_cap(self, configs: Sequence[AeConfig]) -> set[str]:
        """The classes, of `configs`, whose resource group has its max in flight."""
        groups = {g.name: g for config in configs for g in config.class_groups if g is not None and g.max_in_flight is not None}
        if not groups:
            return set()
        figures = await self.context.state.queues.groups.figures(list(groups.values()))
        full = {g.name for g, f in zip(groups.values(), figures, strict=True) if f.in_flight >= (g.max_in_flight or 0)}
        return {
            name
            for config in configs
            for name, g in zip(config.class_order, config.class_groups or (), strict=False)
            if g is not None and g.name in full
        }

    async def write(self, before_ms: int | None) -> None:
        """Write the minutes over (None: every minute counted, at a stop) with what an earlier write left."""
        taken = self.book.take_minutes(before_ms)
        if not taken and not self._unwritten:
            return
        # Thousands of rows at thousands of queues: counted and written in a thread, off the event loop.
        self._untotalled.update(await asyncio.to_thread(delay_records.totals_of, taken))
        self._unwritten += taken
        state = self.context.state
        try:
            if self._untotalled:
                await delay_records.DelayTotals(state.queues.context).add(self._untotalled)
                self._untotalled.clear()
            rows, owner, epoch = self._unwritten, self.context.owner, self.context.epoch
            await asyncio.to_thread(delay_records.write_rows, state.settings.delay_samples_dir, rows, owner, epoch)
            self._unwritten = []
            self._failures.succeeded("writing the delay samples")
        except Exception as exc:  # noqa: BLE001 - kept for the next minute's write (its readers drop a copy written twice)
            self._failures.failed("writing the delay samples", type(exc).__name__, str(exc), exc)
            del self._unwritten[:-MAX_UNWRITTEN]
            return
        if before_ms is not None and before_ms // HOUR_MS != self._compacted_hour:
            await self._compact(before_ms // HOUR_MS)

    async def _compact(self, hour: int) -> None:
        """At the first write of an hour, the minute files written before it merged (delay_records.compact)."""
        try:
            hour_start = datetime.fromtimestamp(hour * HOUR_MS / 1000, UTC)
            await asyncio.to_thread(delay_records.compact, self.context.state.settings.delay_samples_dir, hour_start)
            self._compacted_hour = hour
            self._failures.succeeded("merging the delay samples' minute files")
        except Exception as exc:  # noqa: BLE001 - the files stay as they are, read as they are: tried again at the next write
            self._failures.failed("merging the delay samples' minute files", type(exc).__name__, str(exc), exc)

    async def write_at_stop(self) -> None:
        """What this scheduler counted, the current minute's part too, written before it stops."""
        try:
            async with asyncio.timeout(WRITE_AT_STOP_SECONDS):
                await self.write(None)
        except TimeoutError:
            log.warning("delay samples not written at stop within %ss: their minutes show as missing", WRITE_AT_STOP_SECONDS)
