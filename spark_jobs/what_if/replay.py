"""One application environment's what-if (pure: what a Spark task runs on the environment's records): its recorded
requests as arrivals under the candidate, replayed by the simulation, and its figures beside the recorded day's,
both in the nightly report's shape (per class period, per interval and for the day) and computed alike.

The recorded day's side is the records' own: each request's recorded class, period and times, measured against the
latest definition of its class among the versions that classified the day's records. The records hold no servers,
so that side has none (null)."""

from __future__ import annotations

import json
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from spark_jobs.contract.replay import REPLAY_QUALIFIERS
from spark_jobs.manager.select_order import class_order, importance_rank
from spark_jobs.what_if.candidate import Classifier, defines, environment_of, latest_classes
from spark_jobs.what_if.intervals import Timeline, summarise
from spark_jobs.what_if.model import Arrivals, ClassInterval, Environment, EnvironmentInterval, ManagerSettings, Replay, ServedColumns
from spark_jobs.what_if.simulation import simulate

DAY_S = 86_400.0
ENDED_BY_A_SERVER = ("completed", "failed")
# The records' columns a replay reads (docs/work-records.md) besides its times, and its times: each `<time>_at` of
# the records, which a task reads as `<time>_ms`, milliseconds since the epoch (extract.replay_rows).
RECORD_FIELDS = (
    "service_class",
    "period",
    "policy_version",
    "subsystem_type",
    "userid",
    "subsystem_name",
    "dependent",
    "outcome",
    "promoted",
    "execution_time_ms",
)
TIMES = ("inserted", "selected", "ended")
REPLAY_COLUMNS = (*RECORD_FIELDS, *(f"{time}_ms" for time in TIMES))
_QUALIFIER_POSITIONS = [REPLAY_COLUMNS.index(column) for column in REPLAY_QUALIFIERS.values()]


@dataclass(frozen=True, slots=True)
class ReplayInputs:
    """What every environment's replay shares: the candidate and the recorded versions' definitions (plain data, as
    stored), the day, the manager's settings, the servers' start latencies and its seed."""

    candidate: Mapping[str, Any]
    recorded: Mapping[int, Mapping[str, Any]]
    day_start: datetime
    settings: ManagerSettings
    start_latencies_s: tuple[float, ...]
    seed: int
    interval_s: float = 900.0


def _order(environment: Environment) -> list[str]:
    ranks = {c.name: importance_rank(c.periods[0].importance, c.periods[0].goal.type == "discretionary") for c in environment.classes}
    return list(class_order(ranks))


def _rows(classes: Iterable[ClassInterval], day_start: datetime, minutes: float, servers_known: bool) -> list[dict[str, Any]]:
    """Report rows of the class periods that had work, ended some, or had servers."""
    rows = []
    for row in classes:
        if not (row.had_work or row.ended or (servers_known and (row.servers_wanted or row.servers_connected))):
            continue
        figures = asdict(row)
        start_s = figures.pop("start_s")
        # Named as the nightly report's columns.
        figures["ended_count"], figures["performance_index"] = figures.pop("ended"), figures.pop("pi")
        figures["buckets"] = list(row.buckets) if row.buckets is not None else None
        if not servers_known:
            figures.update(servers_wanted=None, servers_connected=None, server_seconds=None)
        rows.append({"interval_start": (day_start + timedelta(seconds=start_s)).isoformat(), "interval_minutes": round(minutes), **figures})
    return rows


def _environment_rows(totals: Iterable[EnvironmentInterval], day_start: datetime, minutes: float) -> list[dict[str, Any]]:
    return [
        {"interval_start": (day_start + timedelta(seconds=row.start_s)).isoformat(), "interval_minutes": round(minutes), **asdict(row)}
        for row in totals
        if row.servers_wanted or row.servers_connected
    ]


def attainment(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], float]:
    """Per class period, the share of its intervals with work whose PI met the goal (≤ 1); an interval with work and
    nothing ended counts as a miss."""
    worked: dict[tuple[str, int], int] = {}
    met: dict[tuple[str, int], int] = {}
    for row in rows:
        key = (row["service_class"], row["period"])
        if row["had_work"]:
            worked[key] = worked.get(key, 0) + 1
            pi = row["performance_index"]
            met[key] = met.get(key, 0) + int(pi is not None and pi <= 1)
    return {key: met[key] / count for key, count in worked.items()}


def _recorded_figures(environment: Environment, served: ServedColumns, inputs: ReplayInputs) -> dict[str, Any]:
    """The recorded day's figures, as the replay's are computed: no servers (the records hold none)."""
    order = _order(environment)
    (classes, _), (whole, _) = summarise(environment, order, served, Timeline(), DAY_S, inputs.interval_s)
    return {"classes": _rows(classes, inputs.day_start, inputs.interval_s / 60, False) + _rows(whole, inputs.day_start, 1440, False)}


def _replay_figures(result: Replay, inputs: ReplayInputs) -> dict[str, Any]:
    minutes = inputs.interval_s / 60
    return {
        "classes": _rows(result.classes, inputs.day_start, minutes, True) + _rows(result.whole_classes, inputs.day_start, 1440, True),
        "environment": _environment_rows(result.environment, inputs.day_start, minutes)
        + _environment_rows(result.whole_environment, inputs.day_start, 1440),
    }


def summary(predicted: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per class period of either side: the whole-day PI, servers (on average over the day) and server-seconds, and
    the attainment of each side, and whether the candidate's attainment would fall below the recorded day's. Servers
    are a class's first period's (the recorded side has none: null)."""
    whole = {
        side: {(r["service_class"], r["period"]): r for r in rows if r["interval_minutes"] == 1440}
        for side, rows in (("predicted", predicted), ("actual", actual))
    }
    shares = {
        side: attainment(r for r in rows if r["interval_minutes"] != 1440) for side, rows in (("predicted", predicted), ("actual", actual))
    }
    items = []
    for key in sorted(whole["predicted"].keys() | whole["actual"].keys() | shares["predicted"].keys() | shares["actual"].keys()):
        predicted_share, actual_share = shares["predicted"].get(key), shares["actual"].get(key)
        day = {
            f"{side}_{name}": rows.get(key, {}).get(column)
            for name, column in (("pi", "performance_index"), ("servers", "servers_connected"), ("server_seconds", "server_seconds"))
            for side, rows in whole.items()
        }
        items.append(
            {
                "service_class": key[0],
                "period": key[1],
                **day,
                "predicted_attainment": predicted_share,
                "actual_attainment": actual_share,
                "falls": predicted_share is not None and actual_share is not None and predicted_share < actual_share,
            }
        )
    return items


class _Day:
    """One environment's records of the day, read one at a time into columns: the arrivals under the candidate and
    the recorded requests as served (a day of millions: no object kept per record)."""

    def __init__(self, inputs: ReplayInputs) -> None:
        self.day_start_ms = inputs.day_start.timestamp() * 1000
        self.classifier = Classifier.of(inputs.candidate, inputs.recorded)
        self.actual_classes = {n: replace(c, resource_group=None) for n, c in latest_classes(inputs.recorded.items()).items()}
        self.arrivals = Arrivals()
        # Each recorded class, subsystem type, version and qualifiers seen (a day of millions holds few): the class
        # of the arrivals under the candidate, whether it kept the recorded class, and the recorded class's index
        # (None: no recorded version defines it).
        self.seen: dict[tuple[Any, ...], tuple[int, bool, int | None]] = {}
        self.kept = self.classified = 0
        self.recorded = Arrivals()  # of each recorded request its recorded class and insert, and:
        self.selected_s, self.ended_s, self.period, self.promoted = array("d"), array("d"), array("b"), bytearray()
        self.not_ended = self.before = self.unknown = 0
        # The columns' appends, bound once: `add` runs for each of millions of records.
        arrivals, recorded = self.arrivals, self.recorded
        self._arrival = (arrivals.at_s.append, arrivals.service_class.append, arrivals.execution_s.append, arrivals.dependent.append)
        self._recorded = (
            recorded.at_s.append,
            recorded.service_class.append,
            self.selected_s.append,
            self.ended_s.append,
            self.period.append,
            self.promoted.append,
        )

    def _classes(self, key: tuple[Any, ...]) -> tuple[int, bool, int | None]:
        service_class, subsystem_type, version, *values = key
        qualifiers = dict(zip(REPLAY_QUALIFIERS, values, strict=True))
        candidate_class, kept = self.classifier.class_of(service_class, subsystem_type, version, qualifiers)
        recorded = self.recorded.class_index(service_class) if service_class in self.actual_classes else None
        return self.arrivals.class_index(candidate_class), kept, recorded

    def add(self, record: Sequence[Any]) -> None:
        """A record's REPLAY_COLUMNS, in their order."""
        (
            service_class,
            period,
            version,
            subsystem_type,
            _,
            _,
            dependent,
            outcome,
            promoted,
            execution_ms,
            inserted_ms,
            selected_ms,
            ended_ms,
        ) = record
        if outcome not in ENDED_BY_A_SERVER or execution_ms is None or selected_ms is None:
            self.not_ended += 1
            return
        at_s = (inserted_ms - self.day_start_ms) / 1000
        if at_s < 0:
            self.before += 1
            return
        key = (service_class, subsystem_type, version, *[record[n] for n in _QUALIFIER_POSITIONS])
        classes = self.seen.get(key)
        if classes is None:
            classes = self.seen[key] = self._classes(key)
        candidate_class, kept, recorded_class = classes
        if kept:
            self.kept += 1
        else:
            self.classified += 1
        at, of_class, execution, is_dependent = self._arrival
        at(at_s)
        of_class(candidate_class)
        execution(execution_ms / 1000)
        is_dependent(bool(dependent))
        if recorded_class is None:
            self.unknown += 1
            return
        at, of_class, selected, ended, of_period, is_promoted = self._recorded
        at(at_s)
        of_class(recorded_class)
        selected((selected_ms - self.day_start_ms) / 1000)
        ended((ended_ms - self.day_start_ms) / 1000)
        of_period(period)
        is_promoted(bool(promoted))

    def served(self) -> ServedColumns:
        recorded = self.recorded
        return ServedColumns(
            recorded.classes, recorded.service_class, recorded.at_s, self.selected_s, self.ended_s, self.period, self.promoted
        )


def replay_environment(name: str, records: Iterable[Mapping[str, Any]], inputs: ReplayInputs, worker_tasks: int = 1) -> dict[str, Any]:
    """The what-if of environment `name` from its records of the day (REPLAY_COLUMNS by name)."""
    day = _Day(inputs)
    for record in records:
        day.add([record[column] for column in REPLAY_COLUMNS])
    return _replayed(name, day, inputs, worker_tasks)


def _replayed(name: str, day: _Day, inputs: ReplayInputs, worker_tasks: int) -> dict[str, Any]:
    environment = environment_of(inputs.candidate, name, worker_tasks=worker_tasks)
    result = simulate(
        environment,
        day.arrivals,
        inputs.start_latencies_s,
        until_s=DAY_S,
        settings=inputs.settings,
        seed=inputs.seed,
        interval_s=inputs.interval_s,
    )
    predicted = _replay_figures(result, inputs)
    actual = _recorded_figures(Environment(tuple(day.actual_classes.values())), day.served(), inputs)
    unended = sum(1 for ended in result.served.ended_s if ended != ended)  # NaN: not ended
    return {
        "application_environment": name,
        "defined_by_candidate": defines(inputs.candidate, name),
        "worker_tasks": worker_tasks,
        "arrivals": len(day.arrivals),
        "left_out": {"not_ended_by_a_server": day.not_ended, "inserted_before_the_day": day.before, "recorded_class_unknown": day.unknown},
        "kept_recorded_class": day.kept,
        "classified_from_recorded_qualifiers": day.classified,
        "replay": {
            "decisions": result.decisions,
            "servers_started": result.servers_started,
            "servers_retired": result.servers_retired,
            "unended": unended,
        },
        "predicted": predicted,
        "actual": actual,
        "summary": summary(predicted["classes"], actual["classes"]),
    }


def replay_partition(rows: Iterable[Sequence[Any]], inputs: ReplayInputs, worker_tasks: Mapping[str, int]) -> Iterator[str]:
    """A Spark task (job.replay_all): the replay of the one environment whose rows its partition holds, each its
    environment and REPLAY_COLUMNS in order, in the order of their inserts, as JSON text. The rows are read as they
    stream in, into columns. Its seed is the run's and the environment's name: the same whichever other environments
    the run replays. (Here, not in job.py: a task imports this module, which needs neither pyarrow nor a database
    driver.)"""
    name: str | None = None
    day = _Day(inputs)
    for row in rows:
        name = row[0]
        day.add(row[1:])
    if name is not None:
        seeded = replace(inputs, seed=inputs.seed + zlib.crc32(name.encode()))
        yield json.dumps(_replayed(name, day, seeded, worker_tasks.get(name, 1)))
