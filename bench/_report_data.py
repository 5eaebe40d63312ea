"""Synthetic work records for bench/report.py: a day of requests of the example policy (examples/policy.yaml), in
the records' own schema and layout (date-partitioned Parquet, zstd), with the duplicates at-least-once writing
leaves behind.

The mix: ONLINE (percentile goal, 60%), BATCH (average goal, then discretionary in its second period, 25%), REPORTS
(velocity goal, 10%), SYSOTHER (discretionary, 5%); two application environments on two nodes; 96% completed, 1.5%
failed, 1% deleted, 0.5% purged, 1% abandoned; lognormal response times; one request in 1,000 the second life of a
failed one whose dead letter was retried (its token, `life` 2); a request of a class other than ONLINE selected after
queueing past the promotion time is `promoted`, as the service selects it ahead of ONLINE. Each column of the records'
contract has a value rule here (VALUE_RULES); a column without one fails the benchmark, naming it. The files are
written by the records' own writer (`app.work.records.write_file`), one per hour of the day, each declaring its group
keys and, per outbox (node and AE), the range of outbox positions its records held. 0.5% of the requests are written
twice, as the service writes copies: whole batches (10,000 records of one outbox) written again after a crash, each in
a file of its own whose range lies within its hour's file's range (so the job need not read it). The service writes
one file per flush (up to one a second) and does not compact them yet: a day of tens of thousands of small files would
read slower than these.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from app.queues.keys import TOKEN_SEPARATOR, AeKeys
from app.work.records import outbox_range, write_file
from spark_jobs.contract.records import SCHEMA

CLASSES = ("ONLINE", "BATCH", "REPORTS", "SYSOTHER")
CLASS_SHARES = (0.60, 0.25, 0.10, 0.05)
# Median response time per class (ms) of a lognormal with sigma 0.8.
CLASS_MEDIAN_MS = (120, 1800, 900, 400)
BATCH_FIRST_PERIOD_MS = 5000
ENVIRONMENTS = ("PAYROLL", "LOANS")
NODES = ("EAST", "WEST")
OUTCOMES = ("completed", "failed", "deleted", "purged", "abandoned")
OUTCOME_SHARES = (0.96, 0.015, 0.01, 0.005, 0.01)
DUPLICATE_SHARE = 0.005
# Every this many failed requests, one's dead letter is retried: a second life under its token (1 in 1,000 requests).
RETRIED_EVERY = 15
# The service's records_batch: a batch written twice is at most this many records.
REFLUSHED_BATCH = 10_000
HOUR_MS = 3_600_000
PROMOTION_MS = 20_000  # the service's default WLM_BLOCKED_PROMOTION_SECONDS
OUTBOX_PREFIX = "wlm"  # the service's default Redis key prefix (WLM_REDIS_PREFIX)
INCARNATION = "0f5e2a9c41d7b368"  # each outbox's, as the service makes them (one day, Redis never lost)


def _pick(rng: np.random.Generator, values: tuple[object, ...], shares: tuple[float, ...], n: int) -> np.ndarray:
    return rng.choice(len(values), size=n, p=shares)


class MissingValueRule(Exception):
    """The records' contract and the generator's value rules name different columns."""


@dataclass(frozen=True, slots=True)
class _Hour:
    """One hour's requests as drawn, in the order they ended: what the value rules make the columns of."""

    n: int
    ids: np.ndarray  # each request's number in the day: its token's last part
    life: np.ndarray
    classes: np.ndarray
    period: np.ndarray
    report_class: np.ndarray
    environment: np.ndarray
    node: np.ndarray
    outcome: np.ndarray
    server_ended: np.ndarray  # completed or failed: ended by its server, with a server, a selection and an execution
    inserted: np.ndarray
    selected: np.ndarray
    ended: np.ndarray
    response: np.ndarray
    queue: np.ndarray
    execution: np.ndarray


def _retried_lives(classes: np.ndarray, environment: np.ndarray, node: np.ndarray, outcome: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which requests are a failed request's dead letter retried (its second life, under its token), and whose:
    every RETRIED_EVERY-th failed request is retried, and lives again as the next request of its outbox (node and
    AE) and class to end. Chosen without the random generator, so every other value is drawn as before."""
    key = (node * len(ENVIRONMENTS) + environment) * len(CLASSES) + classes
    order = np.argsort(key, kind="stable")  # by outbox and class, each in end order
    follows = np.flatnonzero(key[order[1:]] == key[order[:-1]])
    next_of = np.full(len(key), -1)
    next_of[order[follows]] = order[follows + 1]
    failed = np.flatnonzero(outcome == OUTCOMES.index("failed"))[::RETRIED_EVERY]
    first = failed[next_of[failed] >= 0]
    first = first[~np.isin(next_of[first], first)]  # a retry is not retried again: its token is another's
    return next_of[first], first


def _draw(rng: np.random.Generator, day_start_ms: int, hour: int, first_id: int, n: int) -> _Hour:
    classes = _pick(rng, CLASSES, CLASS_SHARES, n)
    response = np.maximum(1, rng.lognormal(np.log(np.array(CLASS_MEDIAN_MS)[classes]), 0.8)).astype(np.int64)
    outcome = _pick(rng, OUTCOMES, OUTCOME_SHARES, n)
    server_ended = outcome <= 1
    queue = np.where(server_ended, (response * rng.uniform(0.05, 0.6, n)).astype(np.int64), response)
    ended = day_start_ms + hour * HOUR_MS + np.sort(rng.integers(0, HOUR_MS, n))  # in the order they ended, as outboxes hold them
    environment = rng.integers(0, len(ENVIRONMENTS), n)
    node = rng.integers(0, len(NODES), n)
    period = np.where((classes == CLASSES.index("BATCH")) & (response >= BATCH_FIRST_PERIOD_MS), 2, 1).astype(np.int32)
    report_class = np.full(n, None, dtype=object)
    online, reports = classes == CLASSES.index("ONLINE"), classes == CLASSES.index("REPORTS")
    report_class[online] = np.where(rng.random(online.sum()) < 0.7, "ATMA", "CASHA")
    report_class[reports] = "RPTS"
    ids = np.arange(first_id, first_id + n)
    life = np.ones(n, np.int32)
    retries, first_lives = _retried_lives(classes, environment, node, outcome)
    ids[retries], life[retries] = ids[first_lives], 2
    return _Hour(
        n=n,
        ids=ids,
        life=life,
        classes=classes,
        period=period,
        report_class=report_class,
        environment=environment,
        node=node,
        outcome=outcome,
        server_ended=server_ended,
        inserted=ended - response,
        selected=ended - response + queue,
        ended=ended,
        response=response,
        queue=queue,
        execution=np.where(server_ended, response - queue, 0),
    )


def _names(names: tuple[str, ...], indexes: np.ndarray) -> pa.Array:
    return pa.array(np.array(names, dtype=object)[indexes], pa.string())


def _constant(value: object, n: int, type_: pa.DataType) -> pa.Array:
    return pa.array(np.full(n, value, dtype=object), type_)


def _token(hour: _Hour) -> pa.Array:
    """node~AE~id, as the service makes work tokens."""
    ids = pa.array(hour.ids).cast(pa.string())
    return pc.binary_join_element_wise(_names(NODES, hour.node), _names(ENVIRONMENTS, hour.environment), ids, TOKEN_SEPARATOR)


def _timestamps(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    return pa.array(values, mask=mask).cast(pa.timestamp("ms", tz="UTC"))


# How each column of the records' contract (spark_jobs/contract/records.py) is made from an hour's requests. A
# column added to the contract needs a rule here: check_value_rules fails the benchmark until it has one.
VALUE_RULES: dict[str, Callable[[_Hour], pa.Array]] = {
    "token": _token,
    "application_environment": lambda h: _names(ENVIRONMENTS, h.environment),
    "node": lambda h: _names(NODES, h.node),
    "service_class": lambda h: _names(CLASSES, h.classes),
    "period": lambda h: pa.array(h.period),
    "report_class": lambda h: pa.array(h.report_class, pa.string()),
    "policy_version": lambda h: pa.array(np.ones(h.n, np.int32)),
    "queue_manager_id": lambda h: pa.array(np.full(h.n, 7, np.int64)),
    "subsystem_type": lambda h: _constant("CB", h.n, pa.string()),
    "subsystem_name": lambda h: _constant("BENCHQM", h.n, pa.string()),
    "server_id": lambda h: pa.array(np.where(h.server_ended, 100 + h.node, 0), mask=~h.server_ended),
    "userid": lambda h: _constant("ATM0001", h.n, pa.string()),
    "enclave": lambda h: pa.nulls(h.n, pa.string()),
    "dependent": lambda h: pa.array(np.zeros(h.n, bool)),
    "outcome": lambda h: _names(OUTCOMES, h.outcome),
    "deliveries": lambda h: pa.array(np.where(h.server_ended, 1, 0).astype(np.int32)),
    "inserted_at": lambda h: _timestamps(h.inserted),
    "selected_at": lambda h: _timestamps(h.selected, ~h.server_ended),
    "begun_at": lambda h: _timestamps(h.selected, ~h.server_ended),
    "ended_at": lambda h: _timestamps(h.ended),
    "response_time_ms": lambda h: pa.array(h.response),
    "queue_time_ms": lambda h: pa.array(h.queue),
    "execution_time_ms": lambda h: pa.array(h.execution, mask=~h.server_ended),
    "result": lambda h: pa.nulls(h.n, pa.string()),
    "life": lambda h: pa.array(h.life),
    "promoted": lambda h: pa.array(h.server_ended & (h.queue > PROMOTION_MS) & (h.classes != CLASSES.index("ONLINE"))),
}


def check_value_rules(
    rules: Mapping[str, Callable[[Any], pa.Array]] | None = None,
    schema: pa.Schema = SCHEMA,
    where: str = "bench/_report_data.py",
    contract: str = "records'",
) -> None:
    """Raise MissingValueRule, naming the columns, unless `rules` (by default the records' VALUE_RULES; `where`, the
    module that has them) has a rule for every column of the `contract`'s `schema` and for no other."""
    rules = VALUE_RULES if rules is None else rules
    missing = [name for name in schema.names if name not in rules]
    unknown = [name for name in rules if name not in schema.names]
    problems = [f"no value rule for the {contract} column {name!r}" for name in missing]
    problems += [f"a value rule for {name!r}, which is no column of the {contract} contract" for name in unknown]
    if problems:
        raise MissingValueRule("; ".join(f"{where}: {problem}" for problem in problems))


def _hour(rng: np.random.Generator, day_start_ms: int, hour: int, first_id: int, n: int) -> pa.Table:
    requests = _draw(rng, day_start_ms, hour, first_id, n)
    return pa.table({name: VALUE_RULES[name](requests) for name in SCHEMA.names}, schema=SCHEMA)


def generate(records_dir: Path, day: date, count: int, seed: int = 42) -> int:
    """Write `count` distinct requests (plus their duplicates) of `day` under `records_dir`; returns the rows written."""
    check_value_rules()
    rng = np.random.default_rng(seed)
    directory = records_dir / f"date={day.isoformat()}"
    directory.mkdir(parents=True, exist_ok=True)
    day_start_ms = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)
    next_position: dict[str, int] = defaultdict(int)
    batches = max(1, round(count * DUPLICATE_SHARE / REFLUSHED_BATCH))
    batch_size = round(count * DUPLICATE_SHARE / batches)
    reflushed_hours = list(rng.choice(24, size=batches, replace=batches > 24))
    written, first_id = 0, 0
    for hour in range(24):
        n = count // 24 + (1 if hour < count % 24 else 0)
        table = _hour(rng, day_start_ms, hour, first_id, n)
        # Each (node, AE) has an outbox of its own, named by its key tag as the service names it.
        of_outbox = {
            AeKeys(OUTBOX_PREFIX, node, ae).tag: np.flatnonzero(
                pc.and_(pc.equal(table["node"], node), pc.equal(table["application_environment"], ae))
            )
            for node in NODES
            for ae in ENVIRONMENTS
        }
        rows_of = {name: rows for name, rows in of_outbox.items() if len(rows)}
        first_of = {name: next_position[name] for name in rows_of}
        ranges = [outbox_range(name, INCARNATION, first_of[name], first_of[name] + len(rows) - 1) for name, rows in rows_of.items()]
        write_file(table, directory / f"part-{hour:02d}.parquet", ranges)
        for name, rows in rows_of.items():
            next_position[name] += len(rows)
        # A batch written again (a crash between its write and its acknowledgement): consecutive records of one
        # outbox, in a file of their own whose range lies within this hour's (so the job need not read it).
        for again in range(reflushed_hours.count(hour)):
            name = sorted(rows_of)[int(rng.integers(len(rows_of)))]
            start = int(rng.integers(0, len(rows_of[name]) - batch_size + 1))
            copies = table.take(pa.array(rows_of[name][start : start + batch_size]))
            first = first_of[name] + start
            again_range = outbox_range(name, INCARNATION, first, first + batch_size - 1)
            write_file(copies, directory / f"part-{hour:02d}-again-{again}.parquet", [again_range])
            written += batch_size
        written += n
        first_id += n
    return written
