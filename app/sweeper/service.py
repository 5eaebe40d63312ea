"""The slow queue sweeper's pass (after TPF MQSeries': docs/sources.md), a duty of the elected scheduler.

Per queue (a service class's dependent or independent list of one environment on one node), every interval:
measure the service rate, decide (app.sweeper.algorithm), and move what is decided in blobs of at most
`sweeper_blob_requests`, each in three steps: mark and read (sweep_begin.lua; new requests go to the rear from
then on), write the blob to the database with the lock released, then commit only if no request moved was selected,
deleted or changed meanwhile (else the sweep is aborted and its blob forgotten). Selects bring blobs back
(QueueStore.sweep.unsweep).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from prometheus_client import Counter, Gauge

from app.config import Settings
from app.db import utcnow
from app.policy.active import ActivePolicy
from app.queues.keys import AeKeys, queue_name
from app.queues.store import QueueStore
from app.queues.sweep import PendingSweep
from app.sweeper.algorithm import plan_sweep, service_rate
from app.sweeper.blobs import SweptBlobs
from app.sweeper.schemas import SweptQueueOut

log = logging.getLogger(__name__)

SWEPT = Counter("wlm_sweeper_swept_requests_total", "Requests moved from Redis to the database", ["application_environment"])
SWEEPS_ABORTED = Counter("wlm_sweeper_aborted_total", "Sweeps that raced with a select, delete or change", ["application_environment"])
SWEPT_NOW = Gauge(
    "wlm_sweeper_requests_in_database", "Requests in the database now, as of the last pass", ["application_environment", "node"]
)
# Blobs written per step (one database transaction, one commit in Redis): fewer round trips and syncs to disk,
# while a step stays short enough that selects seldom reach what it moves.
BLOBS_PER_STEP = 10
# A blob in no chain this old was left by a sweep that never committed (its process died or was deposed).
LEFTOVER_AGE = timedelta(minutes=5)


@dataclass
class PassReport:
    aborted: int = 0
    queues: dict[str, int] = field(default_factory=dict)  # queue -> requests moved in this pass

    @property
    def swept(self) -> int:
        return sum(self.queues.values())


class Sweeper:
    def __init__(self, queues: QueueStore, blobs: SweptBlobs, settings: Settings, epoch: int) -> None:
        self.queues, self.blobs, self.epoch = queues, blobs, epoch
        self.interval_s = settings.sweeper_interval_seconds
        self.blob_requests = settings.sweeper_blob_requests
        self.min_in_memory = settings.sweeper_min_in_memory

    async def sweep_environment(self, k: AeKeys, classes: list[str]) -> PassReport:
        """One pass over the queues of an environment on a node."""
        elapsed_ms, rates = await self.queues.sweep.take_service_rates(k)
        elapsed = self.interval_s if elapsed_ms is None else elapsed_ms / 1000
        report, swept_now = PassReport(), 0
        for queue in (queue_name(sc, dependent) for sc in classes for dependent in (True, False)):
            sizes = await self.queues.sweep.queue_sizes(k, queue)
            rate = service_rate(rates.get(queue, 0), elapsed, self.interval_s)
            plan = plan_sweep(rate, sizes.front, sizes.rear, chained=bool(sizes.chain), min_in_memory=self.min_in_memory)
            moved = 0
            if plan is not None:
                moved = await self._sweep_part(k, queue, "front", plan.keep, plan.front, report)
                moved += await self._sweep_part(k, queue, "rear", 0, plan.rear, report)
            if moved:
                report.queues[queue] = moved
                sizes = await self.queues.sweep.queue_sizes(k, queue)
            swept_now += sizes.swept
        SWEPT.labels(k.ae).inc(report.swept)
        SWEPT_NOW.labels(k.ae, k.node).set(swept_now)
        await self._forget_leftovers(k)
        return report

    async def _sweep_part(self, k: AeKeys, queue: str, part: str, keep: int, count: int, report: PassReport) -> int:
        """Move `count` requests of one part of a queue, a step of blobs at a time; stops at the first abort."""
        moved = 0
        while moved < count:
            pending = await self.begin(k, queue, part, keep, min(self.blob_requests * BLOBS_PER_STEP, count - moved))
            if not pending.entries:
                break
            if await self.complete(pending) is None:
                report.aborted += 1
                break
            moved += len(pending.entries)
        return moved

    async def begin(self, k: AeKeys, queue: str, part: str, keep: int, count: int) -> PendingSweep:
        return await self.queues.sweep.begin(k, queue, part, keep, count, uuid.uuid4().hex, self.epoch)

    async def complete(self, pending: PendingSweep) -> int | None:
        """Write the blob and commit; returns how many requests left memory, or None when the sweep was aborted
        (the queue is as it was and the blob is forgotten)."""
        live = [entry for entry in pending.entries if entry.meta]
        try:
            blob_ids = await self.blobs.write(pending.keys, pending.queue, live, self.blob_requests) if live else []
        except BaseException:
            await self.queues.sweep.abort(pending)
            raise
        # When the commit fails (fenced, Redis gone) whether it applied is unknown, so the blobs stay: those in no
        # chain are leftovers, forgotten once old.
        moved = await self.queues.sweep.commit(pending, blob_ids)
        if moved is None:
            SWEEPS_ABORTED.labels(pending.keys.ae).inc()
            log.info(
                "sweep of %s %s %s aborted: it raced with a select, delete or change", pending.keys.node, pending.keys.ae, pending.queue
            )
            await self.blobs.forget(blob_ids)
        return moved

    async def _forget_leftovers(self, k: AeKeys) -> None:
        old = await self.blobs.written_before(k, utcnow() - LEFTOVER_AGE)
        if not old:
            return
        chained = {blob for queue in {q for _, q in old} for blob in (await self.queues.sweep.queue_sizes(k, queue)).chain}
        leftovers = [blob_id for blob_id, _ in old if blob_id not in chained]
        if leftovers:
            log.warning("forgetting %d blob(s) of %s on %s that no sweep committed", len(leftovers), k.ae, k.node)
            await self.blobs.forget(leftovers)


async def swept_queues(queues: QueueStore, policy: ActivePolicy | None) -> list[SweptQueueOut]:
    """The queues of the active policy's environments with a part in the database or a rear list."""
    if policy is None:
        return []
    result = []
    for ae in policy.application_environments:
        for node in (n for n in policy.nodes if policy.hosts(ae, n)):
            k = queues.keys(node, ae)
            for sc in policy.class_order:
                for dependent in (True, False):
                    sizes = await queues.sweep.queue_sizes(k, queue_name(sc, dependent))
                    if sizes.chain or sizes.rear:
                        result.append(SweptQueueOut(
                            node=node, application_environment=ae, service_class=sc, dependent=dependent, in_memory_front=sizes.front,
                            in_memory_rear=sizes.rear, in_database=sizes.swept, blobs=len(sizes.chain),
                        ))  # fmt: skip
    return result
