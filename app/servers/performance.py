"""Goal evaluation, per environment and node: how each service class period did, from the requests that ended within
the window (samples kept by the end scripts), judged by the pure functions of spark_jobs.manager.goals.

Results are kept in Redis (a hash per environment and node), so every replica answers the same; Prometheus gauges of
the evaluating process carry the same figures. The manager's server decisions (app.servers.service) start from them.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import UTC, datetime

from app.errors import NotFound
from app.policy.active import ActivePolicy
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.servers.delay_samples import DelayBook, shares
from app.servers.schemas import PeriodPerformance, ServiceClassPerformance
from app.shared.repeated_failures import RepeatedFailures
from spark_jobs.manager.goals import evaluate, period_number

log = logging.getLogger(__name__)
# Samples and class periods that cannot be judged: each environment and class period is judged on its own, so one of
# them never keeps the others from their PI and server decisions; the cause is logged when it starts, not every tick.
UNJUDGED = RepeatedFailures(log)


async def evaluate_environment(
    store: QueueStore, policy: ActivePolicy, keys: AeKeys, window_s: float, delays: DelayBook | None = None
) -> list[PeriodPerformance]:
    """Judge every service class period of one environment on one node and publish the result. A class period with
    nothing ended in the window has an unknown PI (None), except discretionary work (always 0.81). With `delays` (the
    elected scheduler's delay samples), each period's using and delay percentages over the window beside it: computed
    from the scheduler's own counts and published with the evaluation, they cost no read or write of their own, and a
    new scheduler's show the samples it has taken since it was elected (none at first: unknown), never another's."""
    now = await store.clock_ms(near=keys.samples)
    samples_by_period: dict[tuple[str, int], list[tuple[float, float, float]]] = defaultdict(list)
    invalid = 0
    for sample in await store.outbox.samples(keys, now - int(window_s * 1000)):
        spec = policy.service_classes.get(sample.service_class)
        if spec is None:
            continue  # a class the policy has dropped since: nothing to judge it against
        if min(sample.response_ms, sample.queue_ms, sample.execution_ms) < 0:
            invalid += 1  # no script writes one (one clock: Redis's); a sample of an older version might
            continue
        number = period_number([p.duration_ms for p in spec.periods], sample.response_ms)
        samples_by_period[(sample.service_class, number)].append((sample.response_ms, sample.queue_ms, sample.execution_ms))
    where = f"goal evaluation of {keys.ae} on {keys.node}"
    if invalid:
        UNJUDGED.failed(where, "samples with a negative duration left out", f"{invalid} in the window")
    else:
        UNJUDGED.succeeded(where)
    queued = await store.environments.queue_depths(keys)
    promoted = await store.environments.promoted_selects(keys)
    evaluated_at = datetime.fromtimestamp(now / 1000, UTC)
    sampled = delays.window(keys.ae, keys.node, now) if delays is not None else None
    results = []
    for name in policy.class_order:
        spec = policy.service_classes[name]
        for period in spec.periods:
            window = samples_by_period.get((name, period.number), [])
            if not window and not queued.get(name) and period.number > 1:
                continue  # later periods appear once work reaches them
            try:
                judged = evaluate(period.goal.rule(), window)
            except ValueError as exc:
                UNJUDGED.failed(f"{where}, class {name} period {period.number}", "cannot be judged", str(exc))
                continue
            UNJUDGED.succeeded(f"{where}, class {name} period {period.number}")
            states = shares(sampled.get((name, period.number))) if sampled is not None else None
            results.append(
                PeriodPerformance(
                    service_class=name,
                    period=period.number,
                    application_environment=keys.ae,
                    node=keys.node,
                    importance=period.importance,
                    goal=period.goal.model_dump(),
                    window_seconds=window_s,
                    evaluated_at=evaluated_at,
                    ended=judged.ended,
                    ended_per_second=judged.ended / window_s,
                    avg_response_ms=judged.avg_response_ms,
                    p50_response_ms=judged.p50_response_ms,
                    p90_response_ms=judged.p90_response_ms,
                    p99_response_ms=judged.p99_response_ms,
                    avg_queue_ms=judged.avg_queue_ms,
                    avg_execution_ms=judged.avg_execution_ms,
                    velocity=judged.velocity,
                    distribution=list(judged.distribution) if judged.distribution is not None else None,
                    performance_index=judged.pi,
                    goal_met=judged.goal_met,
                    goal_met_share=judged.goal_met_share,
                    queued=queued.get(name, 0) if period.number == 1 else 0,
                    promoted=promoted.get(name, 0) if period.number == 1 else 0,
                    delay_samples=states.samples if states is not None else 0,
                    using_pct=states.using_pct if states is not None else None,
                    delay_pct=states.delay_pct if states is not None and states.using_pct is not None else None,
                )
            )
    await _publish(store, keys, results)
    return results


async def _publish(store: QueueStore, keys: AeKeys, results: list[PeriodPerformance]) -> None:
    # Read back by every replica: DISPLAY, the performance API and /metrics (app/health/metrics.py).
    await store.results.publish_performance(keys, {f"{r.service_class}:{r.period}": r.model_dump_json() for r in results})


async def latest_performance(store: QueueStore, keys: AeKeys) -> list[PeriodPerformance]:
    """The latest published evaluation of one environment on one node (empty before the first)."""
    return [PeriodPerformance.model_validate_json(raw) for raw in await store.results.performance(keys)]


async def service_class_performance(store: QueueStore, policy: ActivePolicy, service_class: str) -> ServiceClassPerformance:
    name = service_class.upper()
    if name not in policy.service_classes:
        raise NotFound(f"no service class {service_class!r} in the active policy", code="unknown_service_class")
    periods = []
    for ae in policy.application_environments:
        for node in policy.nodes:
            if policy.hosts(ae, node):
                periods += [p for p in await latest_performance(store, store.keys(node, ae)) if p.service_class == name]
    periods.sort(key=lambda p: (p.application_environment, p.node, p.period))
    return ServiceClassPerformance(service_class=name, periods=periods)
