"""What /metrics serves beside the process's own counters (HTTP, sweeper, the scheduler's server decisions): the
queues' state and the latest goal evaluation, read from Redis, so every replica answers alike: as the elected
scheduler last rendered them, or at the scrape (app/health/exposition.py).

Per application environment, node and service class: requests queued, and the age of the oldest of them in memory (by
the queue node's clock; a class whose queue's front was swept to the database has older requests there, as
`wlm_queue_swept` says) and the servers the manager's latest decision wants; per environment and node: requests held
by servers, servers registered and dead letters kept; per service class period: the performance index, ended rate,
average response and velocity of the latest evaluation; per service class, the selects that promoted one of its
requests past the promotion time (a counter, kept by the select script); per resource group: requests in flight, its
cap and the time its work has waited on the cap; per class period, histograms of response, queue and execution times
in the nightly report's 14 buckets of its goal (counted by the script that ends each request); per environment, class
and period, the elected scheduler's delay samples: requests counted served (`using`) or waiting, by delay cause (a
counter per state, added to once a minute: app/servers/delay_records.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson

from app.errors import unavailable
from app.health.records import exposition_keys
from app.policy.active import ActivePolicy, period_bounds_ms
from app.queues.base import GroupCap
from app.queues.environments import QueueFigures
from app.queues.resource_groups import GroupFigures
from app.queues.store import QueueStore
from app.servers.delay_records import DelayTotals, parse_total_field

log = logging.getLogger(__name__)

UP = "wlm_queue_metrics_up"
RENDERED = "wlm_queue_metrics_rendered_timestamp_seconds"
RENDERED_HELP = "When the queues' figures below were read from Redis (Unix time, by Redis's clock)"
# A scrape that cannot read Redis within this long serves the process's own counters without the queues' figures.
READ_TIMEOUT_S = 3.0

# Each family's help, in the order they are written. Labels: application_environment and node; service_class for
# a queue's figures and the servers wanted; with period for a class period's figures.
FAMILIES = {
    "wlm_queue_depth": "Requests queued",
    "wlm_queue_oldest_age_seconds": "Age of the oldest request queued in memory (0: none)",
    "wlm_queue_swept": "1 when older requests of the class are in the database (swept)",
    "wlm_requests_in_flight": "Requests selected or begun by servers, not yet ended",
    "wlm_service_class_in_flight": "Requests of the class selected or begun by servers, not yet ended",
    "wlm_servers_registered": "Servers registered with the environment on the node",
    "wlm_dead_letters": "Dead letters kept (abandoned after their last delivery, or failed for good)",
    "wlm_servers_desired": "Servers the manager's latest decision wants for a class",
    "wlm_service_class_performance_index": "Performance index (<= 1: goal met)",
    "wlm_service_class_ended_per_second": "Requests ended per second over the window",
    "wlm_service_class_avg_response_seconds": "Average response (insert to end)",
    "wlm_service_class_velocity": "100 x execution / (execution + queue delay)",
}
# A counter: its samples are named PROMOTED + "_total".
PROMOTED = "wlm_promoted_selects"
PROMOTED_HELP = "Selects that took a request of the class ahead of the importance order, queued past the promotion time"


@dataclass(frozen=True, slots=True)
class QueueReading:
    """The queues' figures under a policy, read at `read_ms` (Redis's clock): per (environment, node) of `places`,
    its figures; the class periods' bucket bounds; per resource group, its figures."""

    places: list[tuple[str, str]]
    figures: list[QueueFigures]
    bounds: Mapping[str, Sequence[Sequence[float]]]
    groups: list[GroupCap]
    held: list[GroupFigures]
    read_ms: int
    delay_totals: dict[str, int]


async def read_queues(queues: QueueStore, policy: ActivePolicy) -> QueueReading:
    """The figures of every queue of `policy`: a script call per environment and node, those of one turn sharing a
    write to Redis."""
    places = [(ae, node) for ae in sorted(policy.application_environments) for node in policy.nodes if policy.hosts(ae, node)]
    groups = list(policy.resource_groups.values())
    read_ms = await queues.clock_ms(near=exposition_keys(queues.prefix)[0])
    figures = await asyncio.gather(*(queues.environments.queue_figures(queues.keys(node, ae), policy.class_order) for ae, node in places))
    held = await queues.groups.figures(groups) if groups else []
    totals = await DelayTotals(queues.context).read()
    return QueueReading(places, list(figures), period_bounds_ms(policy), groups, held, read_ms, totals)


def rendered(reading: QueueReading) -> bytes:
    """The exposition text of `reading` (pure), stamped with when its figures were read."""
    places, figures = reading.places, reading.figures
    text = exposition(places, figures) + histogram_exposition(places, figures, reading.bounds)
    text += group_exposition(reading.groups, reading.held) + delay_exposition(reading.delay_totals)
    stamp = f"# HELP {RENDERED} {RENDERED_HELP}\n# TYPE {RENDERED} gauge\n{RENDERED} {reading.read_ms / 1000}\n"
    return (_up(1) + stamp + text).encode()


async def queue_metrics(queues: QueueStore, policy: ActivePolicy | None) -> bytes:
    """The exposition text of the queues' metrics under `policy` read now (nothing without one), written in a
    thread so that thousands of queues do not stall the event loop. While Redis does not answer (within
    READ_TIMEOUT_S), only `wlm_queue_metrics_up 0`: the process's own counters are still served beside it."""
    if policy is None:
        return b""
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            reading = await read_queues(queues, policy)
    except Exception as exc:
        if not (isinstance(exc, TimeoutError) or unavailable(exc)):
            raise
        return queues_unread(exc)
    return await asyncio.to_thread(rendered, reading)


def queues_unread(exc: BaseException) -> bytes:
    """What a scrape serves of the queues while Redis does not answer."""
    log.warning("the queues' metrics are not served: Redis does not answer (%s)", exc or "timed out")
    return _up(0).encode()


def _up(value: int) -> str:
    return f"# HELP {UP} 1 when the queues' figures below were read from Redis\n# TYPE {UP} gauge\n{UP} {value}\n"


def exposition(places: Sequence[tuple[str, str]], figures: Sequence[QueueFigures]) -> str:
    """The Prometheus text of `figures`, one per (environment, node) of `places` (pure). Written here rather than
    through prometheus_client's metric objects, which took most of a scrape's time with thousands of queues
    (docs/benchmarks.md, bench/metrics_scrape.py)."""
    samples: dict[str, list[str]] = {name: [] for name in (*FAMILIES, PROMOTED)}
    for (ae, node), place_figures in zip(places, figures, strict=True):
        place = f'application_environment="{_escaped(ae)}",node="{_escaped(node)}"'
        samples["wlm_requests_in_flight"].append(f"{{{place}}} {place_figures.in_flight}")
        samples["wlm_servers_registered"].append(f"{{{place}}} {place_figures.servers}")
        samples["wlm_dead_letters"].append(f"{{{place}}} {place_figures.dead_letters}")
        for sc, count in place_figures.desired.items():
            samples["wlm_servers_desired"].append(f'{{{place},service_class="{_escaped(sc)}"}} {count}')
        for sc, inserted in place_figures.inserted_ms.items():
            queue = f'{{{place},service_class="{_escaped(sc)}"}}'
            samples["wlm_service_class_in_flight"].append(f"{queue} {place_figures.in_flight_by_class.get(sc, 0)}")
            age = 0 if inserted is None else max(0, place_figures.now_ms - inserted) / 1000
            samples["wlm_queue_depth"].append(f"{queue} {place_figures.depths.get(sc, 0)}")
            samples["wlm_queue_oldest_age_seconds"].append(f"{queue} {age}")
            samples["wlm_queue_swept"].append(f"{queue} {int(sc in place_figures.swept)}")
            samples[PROMOTED].append(f"{queue} {place_figures.promoted.get(sc, 0)}")
        for raw in place_figures.performance:
            # Only the fields shown, each if there: an evaluation written by another version of the service (a
            # rolling upgrade) must not fail the scrape.
            period = orjson.loads(raw)
            labels = f'{{{place},service_class="{_escaped(str(period.get("service_class")))}",period="{period.get("period")}"}}'
            average = period.get("avg_response_ms")
            for name, value in (
                ("wlm_service_class_ended_per_second", period.get("ended_per_second")),
                ("wlm_service_class_performance_index", period.get("performance_index")),
                ("wlm_service_class_avg_response_seconds", None if average is None else average / 1000),
                ("wlm_service_class_velocity", period.get("velocity")),
            ):
                if isinstance(value, int | float):
                    samples[name].append(f"{labels} {value!r}")
    lines = []
    for name, text in FAMILIES.items():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", *(name + sample for sample in samples[name])]
    lines += [f"# HELP {PROMOTED} {PROMOTED_HELP}", f"# TYPE {PROMOTED} counter", *(f"{PROMOTED}_total{s}" for s in samples[PROMOTED])]
    return "\n".join(lines) + "\n"


# The histograms of ends per class period (lua/includes/end_held.lua `histograms`), by the kind of time they count.
HISTOGRAMS = {
    "r": ("wlm_service_class_response_seconds", "Response times (insert to end) in the 14 report buckets of the period's goal"),
    "q": ("wlm_service_class_queue_seconds", "Queue times (insert to select) in the 14 report buckets of the period's goal"),
    "e": ("wlm_service_class_execution_seconds", "Execution times (select to end) in the 14 report buckets of the period's goal"),
}


def histogram_exposition(
    places: Sequence[tuple[str, str]], figures: Sequence[QueueFigures], bounds: Mapping[str, Sequence[Sequence[float]]]
) -> str:
    """The Prometheus histograms of ended requests per class period (pure): cumulative counts at each report bucket's
    upper bound (`bounds`: per class, per period, in ms; the 14th is +Inf), with their sums in seconds. A class
    period the policy gives no such bounds (no response time goal, or a class it no longer has) is left out."""
    samples: dict[str, list[str]] = {name: [] for name, _ in HISTOGRAMS.values()}
    for (ae, node), place_figures in zip(places, figures, strict=True):
        counted: dict[tuple[str, str, str], dict[str, int]] = {}
        for field, count in place_figures.histograms.items():
            sc, period, kind, bucket = field.rsplit("|", 3)
            counted.setdefault((sc, period, kind), {})[bucket] = count
        for (sc, period, kind), buckets in sorted(counted.items()):
            of_class = bounds.get(sc, ())
            limits = of_class[int(period) - 1] if period.isdigit() and 0 < int(period) <= len(of_class) else ()
            if kind not in HISTOGRAMS or not limits:
                continue
            name = HISTOGRAMS[kind][0]
            labels = f'application_environment="{_escaped(ae)}",node="{_escaped(node)}",service_class="{_escaped(sc)}",period="{period}"'
            total = 0
            for index, limit in enumerate((*limits, None), 1):
                total += buckets.get(str(index), 0)
                le = "+Inf" if limit is None else repr(limit / 1000)
                samples[name].append(f'{name}_bucket{{{labels},le="{le}"}} {total}')
            samples[name] += [f"{name}_sum{{{labels}}} {buckets.get('sum', 0) / 1000}", f"{name}_count{{{labels}}} {total}"]
    lines = []
    for name, text in HISTOGRAMS.values():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} histogram", *samples[name]]
    return "\n".join(lines) + "\n"


# Per resource group (label resource_group): name -> (type, help).
GROUP_FAMILIES = {
    "wlm_resource_group_in_flight": ("gauge", "Requests of the group selected or begun (with slots taken for selects under way)"),
    "wlm_resource_group_max_in_flight": ("gauge", "The group's cap (absent: none)"),
    "wlm_resource_group_capped_seconds": ("counter", "How long the group's work has waited on its cap, in all"),
}


def group_exposition(groups: Sequence[GroupCap], figures: Sequence[GroupFigures]) -> str:
    """The Prometheus text of the resource groups' figures (pure; nothing without groups)."""
    if not groups:
        return ""
    lines = []
    for name, (kind, text) in GROUP_FAMILIES.items():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for group, figure in zip(groups, figures, strict=True):
            label = f'{{resource_group="{_escaped(group.name)}"}}'
            if name == "wlm_resource_group_in_flight":
                lines.append(f"{name}{label} {figure.in_flight}")
            elif name == "wlm_resource_group_max_in_flight" and group.max_in_flight is not None:
                lines.append(f"{name}{label} {group.max_in_flight}")
            elif name == "wlm_resource_group_capped_seconds":
                lines.append(f"{name}_total{label} {figure.capped_ms / 1000}")
    return "\n".join(lines) + "\n"


DELAY_SAMPLES = "wlm_delay_samples"
DELAY_SAMPLES_HELP = "Requests counted by the delay samples in a state: served (using), or waiting by delay cause (unknown: none)"


def delay_exposition(totals: Mapping[str, int]) -> str:
    """The delay samples' totals as one counter per environment, class, period and state (pure; nothing before the
    first minute written)."""
    if not totals:
        return ""
    lines = [f"# HELP {DELAY_SAMPLES} {DELAY_SAMPLES_HELP}", f"# TYPE {DELAY_SAMPLES} counter"]
    for field, count in sorted(totals.items()):
        ae, sc, period, state = parse_total_field(field)
        labels = f'application_environment="{_escaped(ae)}",service_class="{_escaped(sc)}",period="{_escaped(period)}",cause="{state}"'
        lines.append(f"{DELAY_SAMPLES}_total{{{labels}}} {count}")
    return "\n".join(lines) + "\n"


def _escaped(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
