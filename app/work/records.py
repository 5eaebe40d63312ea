"""Work records (SMF-like): one per ended, deleted, purged or abandoned request, as date-partitioned Parquet.

The scripts that end a request append its record to the environment's outbox list in the same atomic step;
the flusher writes a batch to a new Parquet file (written to a temporary name, fsynced, renamed, directory
fsynced) and only then drops the batch from the outbox. A crash in between writes the batch again: records
are at least once, and readers drop duplicates by `token`. The files' schema and footers are the report job's
contract too (spark_jobs/contract/records.py); docs/work-records.md describes them.

Turning a batch into Parquet is CPU work in Python; in a thread of a service process it would hold the
interpreter lock against the event loop and stall the API for tens of milliseconds at a time. It runs in a
writer process instead (one per service process, started on first use): the event loop only hands it the
batch, as JSON text, and waits.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from app.embedded_redis import die_with_parent
from app.policy.active import ActivePolicy, period_number
from app.queues.keys import TOKEN_SEPARATOR
from spark_jobs.contract.records import GROUP_KEYS, GROUP_KEYS_FOOTER, OUTBOX_RANGES_FOOTER, SCHEMA


@dataclass(frozen=True, slots=True)
class OutboxOrigin:
    """Where a batch of records was read: `outbox` (its key tag) of `incarnation` (None if unknown), the first
    record at `first_position`."""

    outbox: str
    incarnation: str | None
    first_position: int


def _ts(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


# Per service class, its periods' durations (see period_number): what a record needs of its policy version.
PeriodTable = dict[str, list[int | None]]


def period_table(policy: ActivePolicy | None) -> PeriodTable:
    if policy is None:
        return {}
    return {name: [period.duration_ms for period in spec.periods] for name, spec in policy.service_classes.items()}


def to_row(meta: dict[str, Any], periods: PeriodTable) -> dict[str, Any]:
    """An outbox entry (the request's metadata at its end) as a record row (pure)."""
    inserted, selected, ended = meta["inserted"], meta.get("selected"), meta["ended"]
    durations = periods.get(meta["sc"])
    response = ended - inserted
    server = meta.get("server")
    return {
        "token": TOKEN_SEPARATOR.join((meta["node"], meta["ae"], meta["id"])),
        "application_environment": meta["ae"],
        "node": meta["node"],
        "service_class": meta["sc"],
        "period": period_number(durations, response) if durations else 1,
        "report_class": meta.get("rc"),
        "policy_version": meta["policy"],
        "queue_manager_id": meta["qm"],
        "subsystem_type": meta.get("subsystem_type"),
        "subsystem_name": meta.get("subsystem_name"),
        "server_id": int(server) if server else None,
        "userid": meta.get("userid"),
        "enclave": meta.get("enclave"),
        "dependent": bool(meta.get("dep")),
        "outcome": meta["outcome"],
        "deliveries": meta.get("deliveries", 0),
        "inserted_at": _ts(inserted),
        "selected_at": _ts(selected),
        "begun_at": _ts(meta.get("begun")),
        "ended_at": _ts(ended),
        "response_time_ms": response,
        "queue_time_ms": (selected if selected is not None else ended) - inserted,
        "execution_time_ms": None if selected is None else ended - selected,
        "result": meta.get("result"),
    }


def write(root: Path, rows: Iterable[dict[str, Any]], origin: OutboxOrigin | None = None) -> list[Path]:
    """Blocking: one new file per date partition, durable when this returns. Rows read from an outbox (`origin`)
    are in its order: the files declare the range they hold."""
    by_date: dict[str, list[dict[str, Any]]] = defaultdict(list)
    positions: dict[str, list[int]] = defaultdict(list)
    for position, row in enumerate(rows, 0 if origin is None else origin.first_position):
        date = row["ended_at"].strftime("%Y-%m-%d")
        by_date[date].append(row)
        positions[date].append(position)
    written = []
    for date, date_rows in by_date.items():
        directory = root / f"date={date}"
        directory.mkdir(parents=True, exist_ok=True)
        name = f"part-{int(datetime.now(UTC).timestamp() * 1000)}-{uuid.uuid4().hex[:12]}.parquet"
        temporary, final = directory / f".{name}.tmp", directory / name
        ranges = [] if origin is None else [outbox_range(origin.outbox, origin.incarnation, positions[date][0], positions[date][-1])]
        write_file(pa.Table.from_pylist(date_rows, schema=SCHEMA), temporary, ranges)
        _fsync(temporary)
        os.replace(temporary, final)
        _fsync(directory)
        written.append(final)
    return written


def outbox_range(outbox: str, incarnation: str | None, first: int, last: int) -> dict[str, Any]:
    """A file's range of positions in `outbox` (of `incarnation`, None if unknown), as its footer declares it."""
    return {"outbox": outbox, "first": first, "last": last} | ({} if incarnation is None else {"incarnation": incarnation})


def write_file(table: pa.Table, path: Path, outbox_ranges: Sequence[dict[str, Any]] = ()) -> None:
    """Blocking: `table` (records in SCHEMA) as one Parquet file, its group keys declared in the footer, and
    its `outbox_ranges` (`outbox_range`: its records' positions there, which no other file's
    records share unless their ranges overlap) if it has some."""
    keys = table.select(list(GROUP_KEYS)).group_by(list(GROUP_KEYS)).aggregate([]).to_pylist()
    footer = {GROUP_KEYS_FOOTER: _json(keys)} | ({OUTBOX_RANGES_FOOTER: _json(outbox_ranges)} if outbox_ranges else {})
    pq.write_table(table.replace_schema_metadata(footer), path, compression="zstd")


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read(root: Path) -> pa.Table:
    """Every record under `root`, duplicates (by token) dropped: what a downstream reader does."""
    files = sorted(root.glob("date=*/*.parquet"))
    if not files:
        return SCHEMA.empty_table()
    table = pa.concat_tables(pq.read_table(f, schema=SCHEMA) for f in files)
    seen: set[str] = set()
    keep = []
    for i, token in enumerate(table.column("token").to_pylist()):
        if token not in seen:
            seen.add(token)
            keep.append(i)
    return table.take(keep)


def write_outbox(root: str, entries: Sequence[str], periods: dict[int, PeriodTable], origin: OutboxOrigin) -> tuple[int, list[int]]:
    """Blocking, in the writer process: outbox entries (read from `origin`) as record
    rows, written durably. Returns how many, or (0, the policy versions missing from `periods`) without writing
    anything."""
    metas = [json.loads(entry) for entry in entries]
    missing = sorted({meta["policy"] for meta in metas} - periods.keys())
    if missing:
        return 0, missing
    write(Path(root), [to_row(meta, periods[meta["policy"]]) for meta in metas], origin)
    return len(metas), []


_writer: ProcessPoolExecutor | None = None
WRITER_NICENESS = 10


def _writer_pool() -> ProcessPoolExecutor:
    global _writer
    if _writer is None:
        # spawn, not fork: this process has threads (database driver, Redis), which a fork would copy mid-state.
        # The writer dies with this process, however it ends (a worker killed by its supervisor left it behind).
        _writer = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_init_writer)
    return _writer


def _init_writer() -> None:
    die_with_parent()
    # A terminal's Ctrl-C reaches the whole process group: the service stops, then shuts its writer down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Records are safe in the outbox until written, so the writer can wait: at a lower priority its bursts of
    # Parquet encoding no longer take a core from the processes answering requests (seen as 10-30 ms stalls).
    os.nice(WRITER_NICENESS)


async def start_writer() -> None:
    """Start the writer process now, at startup, rather than under load at the first flush (its imports take a
    second of CPU)."""
    await asyncio.get_running_loop().run_in_executor(_writer_pool(), os.getpid)


async def write_outbox_in_writer(
    root: Path, entries: Sequence[str], periods: dict[int, PeriodTable], origin: OutboxOrigin
) -> tuple[int, list[int]]:
    """`write_outbox` in this process's writer process, which is started on first use and again if it died."""
    global _writer
    try:
        return await asyncio.get_running_loop().run_in_executor(
            _writer_pool(), write_outbox, str(root), list(entries), periods, origin
        )
    except BrokenProcessPool:
        _writer = None
        raise
