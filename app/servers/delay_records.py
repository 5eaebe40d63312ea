"""The delay samples kept: a minute's counts per class queue as rows of Parquet files under the data directory
(spark_jobs/contract/delay_samples.py: written at least once, copies dropped by readers), and running totals per
environment, class, period and state in Redis, which /metrics shows as counters (app/health/metrics.py) whichever
process is scraped and whichever scheduler sampled."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from app.redis.context import RedisContext
from app.servers.delay_samples import Counts, QueueKey
from app.servers.delays import STATES
from app.shared.parquet_parts import read_parts, write_part, written_ms
from spark_jobs.contract.delay_samples import DEDUP_KEY, SCHEMA

# A minute's row: its start (ms), its queue, its counts.
Row = tuple[int, QueueKey, Counts]
# The kind of part that holds an hour's minute files merged: compaction leaves it as it is.
COMPACTED = "hour"


def rows_table(rows: Sequence[Row], scheduler: str, epoch: int) -> pa.Table:
    """Rows as a table in SCHEMA (pure)."""
    columns: dict[str, list[object]] = {name: [] for name in SCHEMA.names}
    for minute, (ae, node, service_class, period), counts in rows:
        at = datetime.fromtimestamp(minute / 1000, UTC)
        for name, value in zip(
            ("day", "minute", "application_environment", "node", "service_class", "period", "scheduler", "epoch", "samples"),
            (at.date(), at, ae, node, service_class, period, scheduler, epoch, counts[0]),
            strict=True,
        ):
            columns[name].append(value)
        for name, count in zip(STATES, counts[1:], strict=True):
            columns[name].append(count)
    return pa.table(columns, schema=SCHEMA)


def write_rows(root: Path, rows: Sequence[Row], scheduler: str, epoch: int) -> list[Path]:
    """Blocking (thousands of rows a minute at thousands of queues: the caller runs it in a thread): `rows` written
    as `write` writes a table."""
    return write(root, rows_table(rows, scheduler, epoch))


def write(root: Path, table: pa.Table) -> list[Path]:
    """Blocking: one new file per day of `table` under `root`/date=YYYY-MM-DD, durable when this returns
    (app/shared/parquet_parts.py), as the work records are."""
    written = []
    for day in pc.unique(table.column("day")).to_pylist():
        part = table.filter(pc.equal(table.column("day"), day))
        written.append(write_part(root / f"date={cast(date, day).isoformat()}", partial(pq.write_table, part, compression="zstd")))
    return written


def compact(root: Path, before: datetime) -> list[Path]:
    """Blocking: the minute files written before `before` in the day directories of the two hours before it merged,
    one file per directory (`merge_minutes`); returns the files written."""
    days = sorted({(before - timedelta(hours=hours)).date() for hours in (0, 1, 2)})
    merged = (merge_minutes(root / f"date={day.isoformat()}", before) for day in days)
    return [part for part in merged if part is not None]


def merge_minutes(directory: Path, before: datetime) -> Path | None:
    """Blocking: the minute files of `directory` written before `before` (by their names) merged into one file, then
    removed; returns the file written (None: fewer than two to merge). A day is a file a minute (1,440): the report
    read them in 1.7 s of CPU time, and reads a file an hour in a fraction of that. A reader between the merge and
    the removal reads rows twice, which it drops as it drops any copy; a file removed under a reader's listing makes
    it list again (spark_jobs/workload_activity/extract.py). Rows are kept as they are, copies too: a merge that dies
    after its write leaves copies, never a loss."""
    before_ms = int(before.timestamp() * 1000)
    parts = [
        part
        for part in sorted(directory.glob("part-*.parquet"))
        if not part.stem.endswith(f"-{COMPACTED}") and (ms := written_ms(part)) is not None and ms < before_ms
    ]
    tables = [table for table in map(_read_if_there, parts) if table is not None]
    if len(tables) < 2:
        return None
    merged = write_part(directory, partial(pq.write_table, pa.concat_tables(tables), compression="zstd"), COMPACTED)
    for part in parts:
        part.unlink(missing_ok=True)
    return merged


def _read_if_there(part: Path) -> pa.Table | None:
    """A part's rows; None if it is gone (another scheduler's compaction, in a failover, merged it first)."""
    try:
        return pq.read_table(part, schema=SCHEMA)
    except FileNotFoundError:
        return None


def read(root: Path) -> pa.Table:
    """Every row under `root`, copies (by DEDUP_KEY) dropped: what a downstream reader does."""
    return read_parts(root, SCHEMA, lambda table: zip(*(table.column(name).to_pylist() for name in DEDUP_KEY), strict=True))


def totals_of(rows: Sequence[Row]) -> Counter[str]:
    """The rows' counts per environment, class, period and state, as DelayTotals keeps them (pure)."""
    totals: Counter[str] = Counter()
    for _, (ae, _node, service_class, period), counts in rows:
        for state, count in zip(STATES, counts[1:], strict=True):
            if count:
                totals[total_field(ae, service_class, period, state)] += count
    return totals


def total_field(ae: str, service_class: str, period: int, state: str) -> str:
    return f"{ae}|{service_class}|{period}|{state}"


def parse_total_field(field: str) -> tuple[str, str, str, str]:
    """total_field's inverse (pure): neither a class, a period nor a state has a `|`."""
    ae, service_class, period, state = field.rsplit("|", 3)
    return ae, service_class, period, state


class DelayTotals:
    """The running totals in Redis: one hash, `total_field` -> requests counted, added to once a minute."""

    def __init__(self, context: RedisContext) -> None:
        self.redis = context.redis
        self.key = f"{{{context.prefix}:delays}}:totals"

    async def add(self, totals: Mapping[str, int]) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for field, count in totals.items():
                pipe.hincrby(self.key, field, count)
            await pipe.execute()

    async def read(self) -> dict[str, int]:
        return {field: int(count) for field, count in cast(dict[str, str], await self.redis.hgetall(self.key)).items()}
