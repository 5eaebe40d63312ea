"""What /metrics serves beside the process's own counters (HTTP, sweeper, the scheduler's server decisions): the
queues' state and the latest goal evaluation, read from Redis at scrape time, so every replica answers alike.

Per application environment, node and service class: requests queued, and the age of the oldest of them in memory
(by the queue node's clock; a class whose queue's front was swept to the database has older requests there, as
`wlm_queue_swept` says) and the servers the manager's latest decision wants; per environment and node: requests
held by servers and servers registered; per service class period: the performance index, ended rate, average
response and velocity of the latest evaluation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from app.policy.active import ActivePolicy
from app.queues.environments import Oldest, Snapshot
from app.queues.store import QueueStore
from app.servers.schemas import PeriodPerformance

PLACE = ["application_environment", "node"]
QUEUE = [*PLACE, "service_class"]
PERIOD = [*QUEUE, "period"]


async def queue_metrics(queues: QueueStore, policy: ActivePolicy | None) -> bytes:
    """The exposition text of the queues' metrics under `policy` (nothing without one): two round trips to Redis
    whatever the number of queues (the scripts' calls of one turn share a write)."""
    if policy is None:
        return b""
    places = [(ae, node) for ae in sorted(policy.application_environments) for node in policy.nodes if policy.hosts(ae, node)]
    keys = [queues.keys(node, ae) for ae, node in places]
    snapshots, _ = await queues.snapshots(keys, [])
    oldest = await asyncio.gather(*(queues.oldest_queued(k, policy.class_order) for k in keys))
    return generate_latest(_Families(families(places, snapshots, oldest)))  # type: ignore[arg-type]


class _Families:
    """What `generate_latest` asks of a registry."""

    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self.metrics


def families(places: Sequence[tuple[str, str]], snapshots: Sequence[Snapshot], oldest: Sequence[Oldest]) -> list[Metric]:
    """The metric families of `snapshots` and `oldest`, one of each per (environment, node) of `places` (pure)."""
    depth = GaugeMetricFamily("wlm_queue_depth", "Requests queued", labels=QUEUE)
    age = GaugeMetricFamily("wlm_queue_oldest_age_seconds", "Age of the oldest request queued in memory (0: none)", labels=QUEUE)
    swept = GaugeMetricFamily("wlm_queue_swept", "1 when older requests of the class are in the database (swept)", labels=QUEUE)
    held = GaugeMetricFamily("wlm_requests_in_flight", "Requests selected or begun by servers, not yet ended", labels=PLACE)
    servers = GaugeMetricFamily("wlm_servers_registered", "Servers registered with the environment on the node", labels=PLACE)
    desired = GaugeMetricFamily("wlm_servers_desired", "Servers the manager's latest decision wants for a class", labels=QUEUE)
    pi = GaugeMetricFamily("wlm_service_class_performance_index", "Performance index (<= 1: goal met)", labels=PERIOD)
    rate = GaugeMetricFamily("wlm_service_class_ended_per_second", "Requests ended per second over the window", labels=PERIOD)
    response = GaugeMetricFamily("wlm_service_class_avg_response_seconds", "Average response (insert to end)", labels=PERIOD)
    velocity = GaugeMetricFamily("wlm_service_class_velocity", "100 x execution / (execution + queue delay)", labels=PERIOD)
    for (ae, node), snapshot, ages in zip(places, snapshots, oldest, strict=True):
        held.add_metric([ae, node], snapshot.in_flight)
        servers.add_metric([ae, node], snapshot.servers)
        for sc, count in snapshot.desired.items():
            desired.add_metric([ae, node, sc], count)
        for sc, inserted in ages.inserted_ms.items():
            depth.add_metric([ae, node, sc], snapshot.depths.get(sc, 0))
            age.add_metric([ae, node, sc], 0 if inserted is None else max(0, ages.now_ms - inserted) / 1000)
            swept.add_metric([ae, node, sc], int(sc in ages.swept))
        for raw in snapshot.performance:
            period = PeriodPerformance.model_validate_json(raw)
            labels = [ae, node, period.service_class, str(period.period)]
            rate.add_metric(labels, period.ended_per_second)
            if period.performance_index is not None:
                pi.add_metric(labels, period.performance_index)
            if period.avg_response_ms is not None:
                response.add_metric(labels, period.avg_response_ms / 1000)
            if period.velocity is not None:
                velocity.add_metric(labels, period.velocity)
    return [depth, age, swept, held, servers, desired, pi, rate, response, velocity]
