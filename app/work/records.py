"""Work records (SMF-like): one per ended, deleted, purged or abandoned request, as date-partitioned Parquet.

The scripts that end a request append its record to the environment's outbox list in the same atomic step;
the flusher writes a batch to a new Parquet file (written to a temporary name, fsynced, renamed, directory
fsynced) and only then drops the batch from the outbox. A crash in between writes the batch again: records
are at least once, and readers drop duplicates by `token` and `life` (a retried dead letter lives again under its
token). The files' schema and footers are the report job's
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
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from app.processes import die_with_parent
from app.queues.keys import TOKEN_SEPARATOR
from app.queues.request_meta import RequestMeta
from app.shared.parquet_parts import read_parts, write_part
from spark_jobs.contract.records import GROUP_KEYS, GROUP_KEYS_FOOTER, OUTBOX_RANGES_FOOTER, SCHEMA
from spark_jobs.manager.goals import period_number

if TYPE_CHECKING:  # the writer process imports this module: the policy's schemas would cost it 0.3 s of CPU at start
    from app.policy.active import ActivePolicy


@dataclass(frozen=True, slots=True)
class OutboxOrigin:
    """Where a batch of records was read: `outbox` (its key tag) of `incarnation` (None if unknown), the first
    record at `first_position`."""

    outbox: str
    incarnation: str | None
    first_position: int


EPOCH = date(1970, 1, 1)
MS_PER_DAY = 86_400_000

# Per service class, its periods' durations (see period_number): what a record needs of its policy version.
PeriodTable = dict[str, list[int | None]]


def period_table(policy: ActivePolicy | None) -> PeriodTable:
    if policy is None:
        return {}
    return {name: [period.duration_ms for period in spec.periods] for name, spec in policy.service_classes.items()}


def outbox_table(metas: Sequence[RequestMeta], periods: dict[int, PeriodTable]) -> pa.Table:
    """Outbox entries (each request's metadata at its end) as a table of records (pure), built column by column:
    a row of plain values per record, times left in milliseconds (Arrow takes them as they are), rather than a
    dict and four datetimes per record, which took the writer most of its time."""
    rows = [_record(meta, periods[meta.policy]) for meta in metas]
    columns = zip(*rows, strict=True) if rows else ([] for _ in SCHEMA.names)
    return pa.table(dict(zip(SCHEMA.names, columns, strict=True)), schema=SCHEMA)


# What a record takes of a request's metadata at its end, in one call per record.
_FIELDS = RequestMeta.reader(
    "node",
    "application_environment",
    "id",
    "service_class",
    "report_class",
    "policy",
    "queue_manager",
    "subsystem_type",
    "subsystem_name",
    "server",
    "userid",
    "enclave",
    "dependent",
    "outcome",
    "deliveries",
    "inserted",
    "selected",
    "begun",
    "ended",
    "result",
    "life",
    "promoted",
)


def _record(meta: RequestMeta, periods: PeriodTable) -> tuple[Any, ...]:
    """One record's values, in SCHEMA's order."""
    node, ae, request_id, sc, rc, policy, qm, subsystem_type, subsystem_name, server, *rest = _FIELDS(meta)
    userid, enclave, dependent, outcome, deliveries, inserted, selected, begun, ended, result, life, promoted = rest
    durations = periods.get(sc)
    response = ended - inserted
    return (
        TOKEN_SEPARATOR.join((node, ae, request_id)),
        ae,
        node,
        sc,
        period_number(durations, response) if durations else 1,
        rc,
        policy,
        qm,
        subsystem_type,
        subsystem_name,
        int(server) if server else None,
        userid,
        enclave,
        bool(dependent),
        outcome,
        deliveries,
        inserted,
        selected,
        begun,
        ended,
        response,
        (selected if selected is not None else ended) - inserted,
        None if selected is None else ended - selected,
        result,
        life,
        bool(promoted),
    )


def write(root: Path, rows: Iterable[dict[str, Any]], origin: OutboxOrigin | None = None) -> list[Path]:
    """Blocking: records given as rows (SCHEMA's columns), written as `write_table` writes them."""
    return write_table(root, pa.Table.from_pylist(list(rows), schema=SCHEMA), origin)


def write_table(root: Path, table: pa.Table, origin: OutboxOrigin | None = None) -> list[Path]:
    """Blocking: one new file per date partition (of `ended_at`), durable when this returns. Records read from an
    outbox (`origin`) are in its order: the files declare the range of positions they hold."""
    days = pc.divide(table.column("ended_at").cast(pa.int64()), MS_PER_DAY)
    written = []
    for day in pc.unique(days).to_pylist():
        in_day = pc.equal(days, day)
        date = (EPOCH + timedelta(days=day)).isoformat()
        ranges = []
        if origin is not None:
            positions = pc.indices_nonzero(in_day)
            first, last = positions[0].as_py(), positions[-1].as_py()
            ranges = [outbox_range(origin.outbox, origin.incarnation, origin.first_position + first, origin.first_position + last)]
        written.append(write_part(root / f"date={date}", partial(write_file, table.filter(in_day), outbox_ranges=ranges)))
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


def read(root: Path) -> pa.Table:
    """Every record under `root`, duplicates (by token and life) dropped: what a downstream reader does."""
    return read_parts(root, SCHEMA, _token_and_life)


def _token_and_life(table: pa.Table) -> Iterable[tuple[str, int]]:
    return zip(table.column("token").to_pylist(), (life or 1 for life in table.column("life").to_pylist()), strict=True)


def write_outbox(root: str, entries: Sequence[str], periods: dict[int, PeriodTable], origin: OutboxOrigin) -> tuple[int, list[int]]:
    """Blocking, in the writer process: outbox entries (read from `origin`) as record
    rows, written durably. Returns how many, or (0, the policy versions missing from `periods`) without writing
    anything."""
    columns = entry_columns(entries)
    if columns is None:
        metas = [RequestMeta.from_json(entry) for entry in entries]
        missing = sorted({meta.policy for meta in metas} - periods.keys())
        table = None if missing else outbox_table(metas, periods)
    else:
        missing = sorted(set(pc.unique(columns.column("policy")).to_pylist()) - periods.keys())
        table = None if missing else entries_table(columns, periods)
    if table is None:
        return 0, missing
    write_table(Path(root), table, origin)
    return len(entries), []


# The fields of an outbox entry (a request's metadata at its end, lua/includes/finish.lua) that its record takes, typed
# as the scripts write them, by RequestMeta's names; Arrow's JSON reader skips the other keys unread.
_ENTRY_TYPES = {
    "node": pa.string(),
    "application_environment": pa.string(),
    "id": pa.string(),
    "service_class": pa.string(),
    "report_class": pa.string(),
    "policy": pa.int32(),
    "queue_manager": pa.int64(),
    "subsystem_type": pa.string(),
    "subsystem_name": pa.string(),
    "server": pa.string(),
    "userid": pa.string(),
    "enclave": pa.string(),
    "dependent": pa.bool_(),
    "outcome": pa.string(),
    "deliveries": pa.int32(),
    "inserted": pa.int64(),
    "selected": pa.int64(),
    "begun": pa.int64(),
    "ended": pa.int64(),
    "result": pa.string(),
    "life": pa.int32(),
    "promoted": pa.bool_(),
}
_FIELD_OF_KEY = {RequestMeta.json_key(field): field for field in _ENTRY_TYPES}
_ENTRY_PARSE = pa_json.ParseOptions(
    explicit_schema=pa.schema([(RequestMeta.json_key(field), kind) for field, kind in _ENTRY_TYPES.items()]),
    unexpected_field_behavior="ignore",
)
# Fields RequestMeta requires (the per-record path raises KeyError without one), and the defaults of those it does not.
_REQUIRED = ("node", "application_environment", "id", "service_class", "policy", "queue_manager", "outcome", "inserted", "ended")
_DEFAULTS = {field: RequestMeta.default_of(field) for field in ("dependent", "deliveries", "life", "promoted")}


def entry_columns(entries: Sequence[str]) -> pa.Table | None:
    """Outbox entries as columns of their keys, parsed in C++ by Arrow: a record built in Python (`outbox_table`)
    cost the writer 3-4 times as much CPU (5,000-entry batches), most of it per key. None for a batch Arrow cannot read exactly
    as RequestMeta would (a key of another JSON type than the scripts write, a required one missing or null, a server
    id int() would read differently): such a batch takes the per-record path, which reads anything RequestMeta reads.
    The server ids come back as numbers."""
    raw = "\n".join(entries).encode()  # JSON text escapes newlines: one line per entry, unless an entry is not JSON
    try:
        table = pa_json.read_json(
            pa.py_buffer(raw), read_options=pa_json.ReadOptions(use_threads=False, block_size=len(raw) + 1), parse_options=_ENTRY_PARSE
        )
        table = table.rename_columns([_FIELD_OF_KEY[key] for key in table.column_names])
        if table.num_rows != len(entries) or any(table.column(field).null_count for field in _REQUIRED):
            return None
        # The holder's connection id, as text ('' for none): as RequestMeta.server_id reads it.
        server = table.column("server")
        server_id = pc.if_else(pc.equal(server, ""), pa.scalar(None, pa.string()), server).cast(pa.int64())
    except pa.ArrowInvalid:
        return None
    return table.set_column(table.schema.get_field_index("server"), "server", server_id)


def entries_table(columns: pa.Table, periods: dict[int, PeriodTable]) -> pa.Table:
    """Records of outbox entries read by `entry_columns` (pure): what `outbox_table` makes of each, in Arrow compute."""
    column = {name: columns.column(name) for name in _ENTRY_TYPES} | {
        key: pc.fill_null(columns.column(key), default) for key, default in _DEFAULTS.items()
    }
    inserted, selected, ended = column["inserted"], column["selected"], column["ended"]
    response = pc.subtract(ended, inserted)
    values = {
        "token": pc.binary_join_element_wise(column["node"], column["application_environment"], column["id"], TOKEN_SEPARATOR),
        "application_environment": column["application_environment"],
        "node": column["node"],
        "service_class": column["service_class"],
        "period": _periods(column["policy"], column["service_class"], response, periods),
        "report_class": column["report_class"],
        "policy_version": column["policy"],
        "queue_manager_id": column["queue_manager"],
        "subsystem_type": column["subsystem_type"],
        "subsystem_name": column["subsystem_name"],
        "server_id": column["server"],
        "userid": column["userid"],
        "enclave": column["enclave"],
        "dependent": column["dependent"],
        "outcome": column["outcome"],
        "deliveries": column["deliveries"],
        "inserted_at": inserted,
        "selected_at": selected,
        "begun_at": column["begun"],
        "ended_at": ended,
        "response_time_ms": response,
        "queue_time_ms": pc.subtract(pc.coalesce(selected, ended), inserted),
        "execution_time_ms": pc.subtract(ended, selected),
        "result": column["result"],
        "life": column["life"],
        "promoted": column["promoted"],
    }
    return pa.table([values[field.name].cast(field.type) for field in SCHEMA], schema=SCHEMA)


def _periods(
    policy: pa.ChunkedArray, service_class: pa.ChunkedArray, response: pa.ChunkedArray, periods: dict[int, PeriodTable]
) -> pa.Array:
    """Each record's period (period_number), per distinct policy version and class: one past each boundary (the sum of
    the durations up to it) its response reached, at most the class's number of periods."""
    numbers = ones = pa.nulls(len(response), pa.int32()).fill_null(1)
    pairs = pa.table({"policy": policy, "service_class": service_class}).group_by(["policy", "service_class"]).aggregate([]).to_pylist()
    for pair in pairs:
        durations = periods[pair["policy"]].get(pair["service_class"])
        if not durations:
            continue
        passed, boundary = ones, 0
        for duration_ms in durations:
            if duration_ms is None:
                break
            boundary += duration_ms
            passed = pc.add(passed, pc.greater_equal(response, boundary).cast(pa.int32()))
        mine = pc.and_(pc.equal(policy, pair["policy"]), pc.equal(service_class, pair["service_class"]))
        numbers = pc.if_else(mine, pc.min_element_wise(passed, len(durations)), numbers)
    return numbers


_writer: ProcessPoolExecutor | None = None
WRITER_NICENESS = 10


def _writer_pool() -> ProcessPoolExecutor:
    global _writer
    if _writer is None:
        # spawn, not fork: this process has threads (database driver, Redis), which a fork would copy mid-state.
        # The writer dies with this process, however it ends (a worker killed by its supervisor left it behind).
        _writer = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_init_writer, initargs=(os.getpid(),)
        )
    return _writer


def _init_writer(parent: int) -> None:
    # Seen at load 13: a service whose worker died during the writer's imports left the writer running for good.
    die_with_parent(parent)
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
        return await asyncio.get_running_loop().run_in_executor(_writer_pool(), write_outbox, str(root), list(entries), periods, origin)
    except BrokenProcessPool:
        _writer = None
        raise
