"""Synthetic work records for bench/report.py: a day of requests of the example policy (examples/policy.yaml), in
the records' own schema and layout (date-partitioned Parquet, zstd), with the duplicates at-least-once writing
leaves behind.

The mix: ONLINE (percentile goal, 60%), BATCH (average goal, then discretionary in its second period, 25%), REPORTS
(velocity goal, 10%), SYSOTHER (discretionary, 5%); two application environments on two nodes; 96% completed, 1.5%
failed, 1% deleted, 0.5% purged, 1% abandoned; lognormal response times. The files are written by the records' own
writer (`app.work.records.write_file`), one per hour of the day, each declaring its group keys and, per outbox (node
and AE), the range of outbox positions its records held. 0.5% of the requests are written twice, as the service writes
copies: whole batches (10,000 records of one outbox) written again after a crash, each in a file of its own whose
range lies within its hour's file's range (so the job need not read it). The service writes one file per flush (up to
one a second) and does not compact them yet: a day of tens of thousands of small files would read slower than these.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from app.queues.keys import AeKeys
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
# The service's records_batch: a batch written twice is at most this many records.
REFLUSHED_BATCH = 10_000
HOUR_MS = 3_600_000
OUTBOX_PREFIX = "wlm"  # the service's default Redis key prefix (WLM_REDIS_PREFIX)
INCARNATION = "0f5e2a9c41d7b368"  # each outbox's, as the service makes them (one day, Redis never lost)


def _pick(rng: np.random.Generator, values: tuple[object, ...], shares: tuple[float, ...], n: int) -> np.ndarray:
    return rng.choice(len(values), size=n, p=shares)


def _hour(rng: np.random.Generator, day_start_ms: int, hour: int, first_id: int, n: int) -> pa.Table:
    classes = _pick(rng, CLASSES, CLASS_SHARES, n)
    response = np.maximum(1, rng.lognormal(np.log(np.array(CLASS_MEDIAN_MS)[classes]), 0.8)).astype(np.int64)
    outcome = _pick(rng, OUTCOMES, OUTCOME_SHARES, n)
    server_ended = outcome <= 1
    queue = np.where(server_ended, (response * rng.uniform(0.05, 0.6, n)).astype(np.int64), response)
    execution = np.where(server_ended, response - queue, 0)
    ended = day_start_ms + hour * HOUR_MS + np.sort(rng.integers(0, HOUR_MS, n))  # in the order they ended, as outboxes hold them
    inserted = ended - response
    selected = inserted + queue
    environment = rng.integers(0, len(ENVIRONMENTS), n)
    node = rng.integers(0, len(NODES), n)
    class_names = np.array(CLASSES, dtype=object)[classes]
    period = np.where((classes == CLASSES.index("BATCH")) & (response >= BATCH_FIRST_PERIOD_MS), 2, 1).astype(np.int32)
    report_class = np.full(n, None, dtype=object)
    online, reports = classes == CLASSES.index("ONLINE"), classes == CLASSES.index("REPORTS")
    report_class[online] = np.where(rng.random(online.sum()) < 0.7, "ATMA", "CASHA")
    report_class[reports] = "RPTS"
    node_names = np.array(NODES, dtype=object)[node]
    environment_names = np.array(ENVIRONMENTS, dtype=object)[environment]
    ids = pa.array(np.arange(first_id, first_id + n)).cast(pa.string())
    tokens = pc.binary_join_element_wise(pa.array(node_names, pa.string()), pa.array(environment_names, pa.string()), ids, "~")
    timestamp = pa.timestamp("ms", tz="UTC")
    columns = {
        "token": tokens,
        "application_environment": pa.array(environment_names, pa.string()),
        "node": pa.array(node_names, pa.string()),
        "service_class": pa.array(class_names, pa.string()),
        "period": pa.array(period),
        "report_class": pa.array(report_class, pa.string()),
        "policy_version": pa.array(np.ones(n, np.int32)),
        "queue_manager_id": pa.array(np.full(n, 7, np.int64)),
        "subsystem_type": pa.array(np.full(n, "CB", dtype=object), pa.string()),
        "subsystem_name": pa.array(np.full(n, "BENCHQM", dtype=object), pa.string()),
        "server_id": pa.array(np.where(server_ended, 100 + node, 0), mask=~server_ended),
        "userid": pa.array(np.full(n, "ATM0001", dtype=object), pa.string()),
        "enclave": pa.nulls(n, pa.string()),
        "dependent": pa.array(np.zeros(n, bool)),
        "outcome": pa.array(np.array(OUTCOMES, dtype=object)[outcome], pa.string()),
        "deliveries": pa.array(np.where(server_ended, 1, 0).astype(np.int32)),
        "inserted_at": pa.array(inserted).cast(timestamp),
        "selected_at": pa.array(selected, mask=~server_ended).cast(timestamp),
        "begun_at": pa.array(selected, mask=~server_ended).cast(timestamp),
        "ended_at": pa.array(ended).cast(timestamp),
        "response_time_ms": pa.array(response),
        "queue_time_ms": pa.array(queue),
        "execution_time_ms": pa.array(execution, mask=~server_ended),
        "result": pa.nulls(n, pa.string()),
    }
    return pa.table(columns, schema=SCHEMA)


def generate(records_dir: Path, day: date, count: int, seed: int = 42) -> int:
    """Write `count` distinct requests (plus their duplicates) of `day` under `records_dir`; returns the rows written."""
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
