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

import numpy as np
import pyarrow as pa
from pyspark import TaskContext

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
# What classifies a record: its recorded class, subsystem type, version and qualifiers (a day of millions holds few).
KEY_COLUMNS = ("service_class", "subsystem_type", "policy_version", *REPLAY_QUALIFIERS.values())
# A record as a task reads it (job.replay_all): what classifies it (KEY_COLUMNS), whether a server ended it, and the
# rest of what the replay reads, in Arrow batches (Spark's types: the records' period and version int32, times in ms
# since the epoch as int64; nulls where the records have them). The task numbers the keys itself, as first seen.
TASK_SCHEMA = pa.schema(
    [
        ("service_class", pa.string()),
        ("subsystem_type", pa.string()),
        ("policy_version", pa.int32()),
        *((column, pa.string()) for column in REPLAY_QUALIFIERS.values()),
        ("period", pa.int32()),
        ("dependent", pa.bool_()),
        ("ended_by_a_server", pa.bool_()),
        ("promoted", pa.bool_()),
        ("execution_time_ms", pa.int64()),
        *((f"{time}_ms", pa.int64()) for time in TIMES),
    ]
)
TASK_COLUMNS = tuple(TASK_SCHEMA.names)
CHUNK = 65_536  # records an Arrow batch of a task holds at most


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
    """One environment's records of the day, read a chunk at a time into columns: the arrivals under the candidate
    and the recorded requests as served (a day of millions: no object kept per record, numpy over each chunk)."""

    def __init__(self, inputs: ReplayInputs) -> None:
        self.day_start_ms = inputs.day_start.timestamp() * 1000
        self.classifier = Classifier.of(inputs.candidate, inputs.recorded)
        self.actual_classes = {n: replace(c, resource_group=None) for n, c in latest_classes(inputs.recorded.items()).items()}
        self.arrivals = Arrivals()
        # Each key (KEY_COLUMNS's values) by a number in the order first seen; by that number the class of its arrivals
        # under the candidate, whether it kept the recorded class, and the recorded class's index (-1: no recorded
        # version defines it).
        self.numbers: dict[tuple[Any, ...], int] = {}
        self.candidate_class: list[int] = []
        self.kept_class: list[bool] = []
        self.recorded_class: list[int] = []
        self.kept = self.classified = 0
        self.recorded = Arrivals()  # of each recorded request its recorded class and insert, and:
        self.selected_s, self.ended_s, self.period, self.promoted = array("d"), array("d"), array("b"), bytearray()
        self.not_ended = self.before = self.unknown = 0

    def _number(self, key: tuple[Any, ...]) -> int:
        """The key's number, a new key classified (a day of millions holds few)."""
        number = self.numbers.get(key)
        if number is None:
            service_class, subsystem_type, version, *values = key
            qualifiers = dict(zip(REPLAY_QUALIFIERS, values, strict=True))
            candidate_class, kept = self.classifier.class_of(service_class, subsystem_type, version, qualifiers)
            recorded = self.recorded.class_index(service_class) if service_class in self.actual_classes else -1
            number = self.numbers[key] = len(self.numbers)
            self.candidate_class.append(self.arrivals.class_index(candidate_class))
            self.kept_class.append(kept)
            self.recorded_class.append(recorded)
        return number

    def _keys(self, batch: pa.RecordBatch, keep: np.ndarray) -> np.ndarray:
        """The kept records' key numbers: each column dictionary-encoded, the columns' codes combined into one per
        record, and each distinct combination numbered in the order its records come (Python per key, not per row)."""
        kept = pa.array(keep)
        codes = np.zeros(int(keep.sum()), dtype=np.int64)
        bound, columns = 1, []
        for name in KEY_COLUMNS:
            encoded = batch.column(name).filter(kept).dictionary_encode()
            values = encoded.dictionary.to_pylist() + [None]  # the last: a null's
            indices = encoded.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False).astype(np.int64)
            if bound * len(values) >= 1 << 62:  # compacted before the product could overflow
                bound, codes = _compacted(codes)
            codes, bound = codes * len(values) + indices, bound * len(values)
            columns.append((values, indices))
        _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        numbers = np.empty(len(first), dtype=np.intp)
        for distinct in np.argsort(first, kind="stable"):
            row = first[distinct]
            numbers[distinct] = self._number(tuple(values[indices[row]] for values, indices in columns))
        return numbers[inverse.reshape(-1)]

    def add(self, batch: pa.RecordBatch) -> None:
        """Records as TASK_SCHEMA's columns, in their order (a batch of a day's)."""
        execution, selected = _floats(batch.column("execution_time_ms")), _floats(batch.column("selected_ms"))
        ended = _flags(batch.column("ended_by_a_server")) & ~np.isnan(execution) & ~np.isnan(selected)
        at_s = (_floats(batch.column("inserted_ms")) - self.day_start_ms) / 1000
        keep = ended & (at_s >= 0)
        self.not_ended += len(ended) - int(ended.sum())
        self.before += int(ended.sum() - keep.sum())
        if not keep.any():
            return
        codes = self._keys(batch, keep)
        kept_class = np.array(self.kept_class, dtype=bool)[codes]
        self.kept += int(kept_class.sum())
        self.classified += len(codes) - int(kept_class.sum())
        at_s = at_s[keep]
        arrivals = self.arrivals
        arrivals.at_s.frombytes(at_s.tobytes())
        arrivals.service_class.frombytes(np.array(self.candidate_class, dtype=np.uint16)[codes].tobytes())
        arrivals.execution_s.frombytes((execution[keep] / 1000).tobytes())
        arrivals.dependent.extend(_flags(batch.column("dependent"))[keep].tobytes())
        recorded_class = np.array(self.recorded_class, dtype=np.int64)[codes]
        known = recorded_class >= 0
        self.unknown += len(codes) - int(known.sum())
        self.recorded.at_s.frombytes(at_s[known].tobytes())
        self.recorded.service_class.frombytes(recorded_class[known].astype(np.uint16).tobytes())
        self.selected_s.frombytes(((selected[keep][known] - self.day_start_ms) / 1000).tobytes())
        self.ended_s.frombytes(((_floats(batch.column("ended_ms"))[keep][known] - self.day_start_ms) / 1000).tobytes())
        self.period.frombytes(_periods(batch.column("period"), keep)[known].tobytes())
        self.promoted.extend(_flags(batch.column("promoted"))[keep][known].tobytes())

    def served(self) -> ServedColumns:
        recorded = self.recorded
        return ServedColumns(
            recorded.classes, recorded.service_class, recorded.at_s, self.selected_s, self.ended_s, self.period, self.promoted
        )


def _floats(column: pa.Array) -> np.ndarray:
    """A column of numbers as doubles, a null as NaN."""
    return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False))


def _flags(column: pa.Array) -> np.ndarray:
    """A column of flags as booleans, a null as false."""
    return np.asarray(column.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _periods(column: pa.Array, keep: np.ndarray) -> np.ndarray:
    """The periods of the records kept, as int8: each such record has one (a server ended it)."""
    if column.null_count and column.filter(pa.array(keep)).null_count:
        raise ValueError("a record a server ended has no period")
    return np.asarray(column.fill_null(0).to_numpy(zero_copy_only=False))[keep].astype(np.int8)


def _compacted(codes: np.ndarray) -> tuple[int, np.ndarray]:
    """`codes` renumbered 0..n-1 in their order, and n."""
    distinct, inverse = np.unique(codes, return_inverse=True)
    return len(distinct), inverse.reshape(-1).astype(np.int64)


def task_table(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Records (REPLAY_COLUMNS by name) as a task reads them (job.replay_all): TASK_SCHEMA's columns."""
    rows = [
        {
            **{column: record[column] for column in TASK_SCHEMA.names if column in record},
            "ended_by_a_server": record["outcome"] in ENDED_BY_A_SERVER,
        }
        for record in records
    ]
    return pa.Table.from_pylist(rows, TASK_SCHEMA)


def replay_environment(name: str, records: Iterable[Mapping[str, Any]], inputs: ReplayInputs, worker_tasks: int = 1) -> dict[str, Any]:
    """The what-if of environment `name` from its records of the day (REPLAY_COLUMNS by name)."""
    day = _Day(inputs)
    for batch in task_table(records).to_batches(CHUNK):
        day.add(batch)
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


def replay_batches(
    index: int,
    batches: Iterable[pa.RecordBatch],
    names: Sequence[str],
    inputs: ReplayInputs,
    worker_tasks: Mapping[str, int],
) -> Iterator[str]:
    """The replay of environment `names[index]` from its rows, in Arrow batches of TASK_SCHEMA, in the order of their
    inserts, as JSON text; nothing when there are none. Its seed is the run's and the environment's name: the same
    whichever other environments the run replays."""
    name = names[index]
    day = _Day(inputs)
    replayed = False
    for batch in batches:
        day.add(batch)
        replayed = replayed or batch.num_rows > 0
    if replayed:
        seeded = replace(inputs, seed=inputs.seed + zlib.crc32(name.encode()))
        yield json.dumps(_replayed(name, day, seeded, worker_tasks.get(name, 1)))


RESULT_SCHEMA = "result string"


def replay_task(
    batches: Iterable[pa.RecordBatch],
    names: Sequence[str],
    inputs: ReplayInputs,
    worker_tasks: Mapping[str, int],
) -> Iterator[pa.RecordBatch]:
    """A Spark task (job.replay_all, `mapInArrow`): the replay of the environment whose rows its partition holds (the
    partition's index into `names`), one row of RESULT_SCHEMA. The rows arrive as Arrow batches: no row is unpickled.
    (Here, not in job.py: a task imports this module, which needs no database driver.)"""
    context = TaskContext.get()
    assert context is not None, "replay_task runs in a Spark task"
    for text in replay_batches(context.partitionId(), batches, names, inputs, worker_tasks):
        yield pa.RecordBatch.from_pydict({"result": [text]})
