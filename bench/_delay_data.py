"""Synthetic delay samples for bench/report.py: a day of the elected scheduler's minute rows for the class queues the
records' day has (bench/_report_data.py: each AE on each node, each class period of the example policy), in the
samples' own schema and layout (spark_jobs/contract/delay_samples.py), written by the scheduler's own writer
(`app.servers.delay_records.write`): a file per hour, as a finished day lies once the scheduler has merged each hour's
minute files, or a file per minute, as it writes them.

What the rows hold: every queue sampled at each of the minute's 240 ticks (WLM_SAMPLE_INTERVAL_MS 250), its requests
counted as served or waiting by cause, at rates per class; waiting requests in their class's first period only (as
the scheduler counts them). The day has a scheduler failover at FAILOVER_MINUTE: the old scheduler's rows end
partway through it, the new one's start later in it (both rows of that minute, fewer samples between them than a
minute has), and the two minutes after it no scheduler sampled (no rows). COPY_EVERY-th minute's file is written
again, whole, as a write retried after a crash writes it: copies the report must drop. Each column of the contract
has a value rule here (VALUE_RULES); a column without one fails the benchmark, naming it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from app.servers.delay_records import write
from bench._report_data import CLASSES, ENVIRONMENTS, NODES, check_value_rules
from spark_jobs.contract.delay_samples import SCHEMA, STATE_COLUMNS

TICKS_PER_MINUTE = 240
# The class periods of the example policy whose requests the records' day has (BATCH's second period included).
CLASS_PERIODS = tuple((name, 1) for name in CLASSES) + (("BATCH", 2),)
# Mean requests per tick in each state, per class: served, then each delay cause in the contract's order, unknown.
STATE_MEANS = {
    "ONLINE": (6.0, 0.2, 0.1, 0.0, 0.05, 0.8, 1.5, 0.0, 0.3),
    "BATCH": (3.0, 0.1, 0.2, 1.0, 0.05, 0.4, 2.5, 0.3, 0.2),
    "REPORTS": (1.0, 0.1, 0.05, 0.5, 0.05, 0.2, 1.0, 0.2, 0.1),
    "SYSOTHER": (0.5, 0.0, 0.0, 0.0, 0.1, 0.1, 0.8, 0.4, 0.1),
}
FAILOVER_MINUTE = 13 * 60 + 7
# Of the failover minute's ticks: the old scheduler sampled the first, the new one the last; those between, nobody.
OLD_TICKS, NEW_TICKS = 100, 90
GAP_MINUTES = 2  # after the failover minute, minutes no scheduler sampled
COPY_EVERY = 97


@dataclass(frozen=True, slots=True)
class _Minute:
    """One minute's rows as drawn: one per sampled queue (and scheduler, in the failover minute)."""

    n: int
    at: datetime
    queues: list[tuple[str, str, str, int]]
    scheduler: list[str]
    epoch: list[int]
    samples: np.ndarray
    states: dict[str, np.ndarray]


def _queues() -> list[tuple[str, str, str, int]]:
    return [(ae, node, name, period) for ae in ENVIRONMENTS for node in NODES for name, period in CLASS_PERIODS]


def _draw(rng: np.random.Generator, at: datetime, minute: int) -> _Minute:
    queues = _queues()
    if minute == FAILOVER_MINUTE:
        rows = [(queue, "scheduler-a", 1, OLD_TICKS) for queue in queues] + [(queue, "scheduler-b", 2, NEW_TICKS) for queue in queues]
    else:
        rows = [(queue, *(("scheduler-a", 1) if minute < FAILOVER_MINUTE else ("scheduler-b", 2)), TICKS_PER_MINUTE) for queue in queues]
    samples = np.array([ticks for *_, ticks in rows], np.int32)
    means = np.array([STATE_MEANS[queue[2]] for queue, *_ in rows])
    # A period after the first is counted served only: waiting requests are counted in their class's first period.
    later_period = np.array([queue[3] > 1 for queue, *_ in rows])
    means[later_period, 1:] = 0.0
    counts = rng.poisson(means * samples[:, None])
    return _Minute(
        n=len(rows),
        at=at,
        queues=[queue for queue, *_ in rows],
        scheduler=[scheduler for _, scheduler, _, _ in rows],
        epoch=[epoch for _, _, epoch, _ in rows],
        samples=samples,
        states={state: counts[:, index].astype(np.int64) for index, state in enumerate(STATE_COLUMNS)},
    )


def _names(m: _Minute, index: int) -> pa.Array:
    return pa.array([queue[index] for queue in m.queues], pa.string())


# How each column of the delay samples' contract is made from a minute's rows.
VALUE_RULES: dict[str, Callable[[_Minute], pa.Array]] = {
    "day": lambda m: pa.array([m.at.date()] * m.n, pa.date32()),
    "minute": lambda m: pa.array([m.at] * m.n, pa.timestamp("ms", tz="UTC")),
    "application_environment": lambda m: _names(m, 0),
    "node": lambda m: _names(m, 1),
    "service_class": lambda m: _names(m, 2),
    "period": lambda m: pa.array([queue[3] for queue in m.queues], pa.int32()),
    "scheduler": lambda m: pa.array(m.scheduler, pa.string()),
    "epoch": lambda m: pa.array(m.epoch, pa.int64()),
    "samples": lambda m: pa.array(m.samples),
    **{state: (lambda m, state=state: pa.array(m.states[state])) for state in STATE_COLUMNS},
}


def check_rules() -> None:
    """Raise MissingValueRule unless VALUE_RULES has a rule for every column of the contract and for no other."""
    check_value_rules(VALUE_RULES, SCHEMA, "bench/_delay_data.py", "delay samples'")


def generate(samples_dir: Path, day: date, seed: int = 7, *, by_minute: bool = False) -> int:
    """Write `day`'s samples under `samples_dir` (some minutes written twice) a file per hour, as a finished day lies once
    the scheduler has merged each hour's minute files (app/servers/delay_records.compact), or (`by_minute`) a file per
    minute, as the scheduler writes them before (each write durable: 1,440 files took 15 s under load); returns the rows
    written."""
    check_rules()
    rng = np.random.default_rng(seed)
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    written = 0
    hour: list[pa.Table] = []
    for minute in range(1440):
        if not FAILOVER_MINUTE < minute <= FAILOVER_MINUTE + GAP_MINUTES:
            drawn = _draw(rng, midnight + timedelta(minutes=minute), minute)
            table = pa.table({name: VALUE_RULES[name](drawn) for name in SCHEMA.names}, schema=SCHEMA)
            hour += [table] * (2 if minute % COPY_EVERY == 0 else 1)
        if by_minute or minute % 60 == 59:
            for part in [hour] if not by_minute else [[table] for table in hour]:
                write(samples_dir, pa.concat_tables(part))
            written += sum(table.num_rows for table in hour)
            hour = []
    return written
