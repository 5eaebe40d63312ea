"""A records file declares its group keys in its footer, so the nightly report can name its groups without a
second read of the records; files written before a column was added read beside newer ones."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.queues.request_meta import RequestMeta
from app.work import records
from app.work.records import OutboxOrigin, entries_table, entry_columns, outbox_table, write, write_file, write_outbox
from spark_jobs.contract.records import GROUP_KEYS, GROUP_KEYS_FOOTER, OUTBOX_RANGES_FOOTER, SCHEMA


def key(
    ae: str = "PAYROLL",
    node: str = "EAST",
    service_class: str = "ONLINE",
    period: int = 1,
    report_class: str | None = "ATMA",
    version: int = 1,
) -> dict:
    return dict(zip(GROUP_KEYS, (ae, node, service_class, period, report_class, version), strict=True))


def test_a_file_declares_the_distinct_group_keys_of_its_records(tmp_path: Path) -> None:
    keys = [key(), key(), key(report_class=None), key(report_class=None), key(period=2), key(node="WEST"), key(version=2)]
    rows = [{**group, "token": f"EAST~PAYROLL~{i}", "outcome": "completed"} for i, group in enumerate(keys)]
    path = tmp_path / "part.parquet"
    write_file(pa.Table.from_pylist(rows, schema=SCHEMA), path)

    declared = json.loads(pq.read_metadata(path).metadata[GROUP_KEYS_FOOTER])
    assert sorted(declared, key=repr) == sorted([key(), key(report_class=None), key(period=2), key(node="WEST"), key(version=2)], key=repr)
    # The records themselves are as given.
    assert pq.read_table(path).select(["token", *GROUP_KEYS]).to_pylist() == [
        {"token": r["token"], **{c: r[c] for c in GROUP_KEYS}} for r in rows
    ]


def test_an_empty_file_declares_no_keys(tmp_path: Path) -> None:
    path = tmp_path / "part.parquet"
    write_file(SCHEMA.empty_table(), path)
    assert json.loads(pq.read_metadata(path).metadata[GROUP_KEYS_FOOTER]) == []


def test_a_batch_across_midnight_declares_each_day_s_own_positions(tmp_path: Path) -> None:
    before, after = datetime(2026, 11, 1, 23, 59, 59, tzinfo=UTC), datetime(2026, 11, 2, 0, 0, 1, tzinfo=UTC)
    ended = [before, before, after, before, after]
    rows = [{**key(), "token": f"t{i}", "outcome": "completed", "ended_at": at} for i, at in enumerate(ended)]
    files = write(tmp_path, rows, OutboxOrigin("{wlm:EAST:PAYROLL}", "5f1c", first_position=100))
    ranges = {f.parent.name: json.loads(pq.read_metadata(f).metadata[OUTBOX_RANGES_FOOTER]) for f in files}
    assert ranges == {
        "date=2026-11-01": [{"outbox": "{wlm:EAST:PAYROLL}", "incarnation": "5f1c", "first": 100, "last": 103}],
        "date=2026-11-02": [{"outbox": "{wlm:EAST:PAYROLL}", "incarnation": "5f1c", "first": 102, "last": 104}],
    }
    # Without an incarnation (Redis lost it while the batch was read), the ranges declare none.
    [unknown, _] = sorted(write(tmp_path / "unknown", rows, OutboxOrigin("{wlm:EAST:PAYROLL}", None, first_position=0)))
    assert json.loads(pq.read_metadata(unknown).metadata[OUTBOX_RANGES_FOOTER]) == [{"outbox": "{wlm:EAST:PAYROLL}", "first": 0, "last": 3}]
    # Written without an outbox (another writer's rows), a file declares no ranges.
    [plain] = write(tmp_path / "plain", rows[:1])
    assert OUTBOX_RANGES_FOOTER not in pq.read_metadata(plain).metadata


def test_outbox_entries_become_records_column_by_column() -> None:
    ended = {"id": "a1", "node": "EAST", "ae": "PAYROLL", "sc": "ONLINE", "rc": "ATMA", "policy": 3, "qm": 7, "subsystem_type": "CB",
             "subsystem_name": "CICSA", "server": "12", "userid": "ATM01", "dep": 0, "outcome": "completed", "deliveries": 2,
             "inserted": 1_764_000_000_000, "selected": 1_764_000_000_040, "begun": 1_764_000_000_050, "ended": 1_764_000_000_400,
             "result": "ok", "life": 2, "promoted": True}  # fmt: skip
    deleted = {"id": "b2", "node": "EAST", "ae": "PAYROLL", "sc": "BATCH", "policy": 3, "qm": 7, "outcome": "deleted",
               "inserted": 1_764_000_000_000, "ended": 1_764_000_000_900}  # fmt: skip
    periods = {3: {"ONLINE": [300, None]}}  # ONLINE's first period ends at 300 ms of response; BATCH has none listed

    table = outbox_table([RequestMeta(ended), RequestMeta(deleted)], periods)

    assert table.schema == SCHEMA

    def at(ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000, UTC)

    assert table.to_pylist() == [
        {"token": "EAST~PAYROLL~a1", "application_environment": "PAYROLL", "node": "EAST", "service_class": "ONLINE", "period": 2,
         "report_class": "ATMA", "policy_version": 3, "queue_manager_id": 7, "subsystem_type": "CB", "subsystem_name": "CICSA",
         "server_id": 12, "userid": "ATM01", "enclave": None, "dependent": False, "outcome": "completed", "deliveries": 2,
         "inserted_at": at(1_764_000_000_000), "selected_at": at(1_764_000_000_040), "begun_at": at(1_764_000_000_050),
         "ended_at": at(1_764_000_000_400), "response_time_ms": 400, "queue_time_ms": 40, "execution_time_ms": 360, "result": "ok",
         "life": 2, "promoted": True},
        {"token": "EAST~PAYROLL~b2", "application_environment": "PAYROLL", "node": "EAST", "service_class": "BATCH", "period": 1,
         "report_class": None, "policy_version": 3, "queue_manager_id": 7, "subsystem_type": None, "subsystem_name": None,
         "server_id": None, "userid": None, "enclave": None, "dependent": False, "outcome": "deleted", "deliveries": 0,
         "inserted_at": at(1_764_000_000_000), "selected_at": None, "begun_at": None, "ended_at": at(1_764_000_000_900),
         "response_time_ms": 900, "queue_time_ms": 900, "execution_time_ms": None, "result": None, "life": 1, "promoted": False},
    ]  # fmt: skip
    assert outbox_table([], periods).num_rows == 0


# Per policy version, its classes' periods: ONLINE moves on at 300 ms of response, then 500 more; REPORT has three
# periods and no open-ended last; BATCH is not listed; in version 2 ONLINE lists none.
PERIODS = {1: {"ONLINE": [300, 500, None], "REPORT": [100, 200, 400]}, 2: {"ONLINE": []}}


def outbox_entries() -> list[str]:
    """Outbox entries as the end scripts write them (JSON of a request's metadata at its end), keys present, null
    and absent in turn, responses on and around the periods' boundaries."""
    entries = []
    shapes = itertools.product(
        [(1, "ONLINE"), (1, "REPORT"), (1, "BATCH"), (2, "ONLINE")], [0, 99, 100, 299, 300, 799, 800, 5000], [False, True]
    )
    for n, ((policy, service_class), response, delivered) in enumerate(shapes):
        inserted = 1_764_000_000_000 + n
        entry: dict[str, object] = {"sc": service_class, "rc": "ATMA" if n % 3 else None, "dep": n % 2 == 0, "qm": 7,
            "subsystem_type": "CB", "subsystem_name": "CICSA", "userid": None if n % 4 else "ATM01", "enclave": None,
            "policy": policy, "node": "EAST", "ae": "PAYROLL", "state": "b", "deliveries": 0, "exit": "", "place": n,
            "inserted": inserted, "outcome": "completed" if delivered else "deleted", "ended": inserted + response,
            "id": f"r{n}"}  # fmt: skip
        if delivered:
            entry |= {"server": ["12", "", "3"][n % 3], "deliveries": 1 + n % 2, "selected": inserted + response // 2}
            entry |= {"begun": inserted + response // 2 + 1} if n % 5 else {}
            entry |= {"result": '{"ok":true}', "life": 2, "promoted": True} if n % 3 == 0 else {}
        if n % 7 == 0:
            entry = {key: value for key, value in entry.items() if value is not None and key != "deliveries"}
        entries.append(orjson.dumps(entry).decode())
    return entries


def test_outbox_entries_read_by_arrow_are_the_records_read_one_by_one() -> None:
    entries = outbox_entries()
    columns = entry_columns(entries)
    assert columns is not None
    by_arrow = entries_table(columns, PERIODS)
    one_by_one = outbox_table([RequestMeta.from_json(entry) for entry in entries], PERIODS)
    assert by_arrow.schema == SCHEMA
    assert by_arrow.to_pylist() == one_by_one.to_pylist()
    assert sorted(set(by_arrow.column("period").to_pylist())) == [1, 2, 3]  # every period reached, and no further


@pytest.mark.parametrize(
    "odd",
    [{"dep": 0}, {"server": 12}, {"server": " 12"}, {"inserted": 1_764_000_000_000.0}, {"sc": None}],
    ids=["dep as a number", "server as a number", "server int() reads", "time as a float", "null class"],
)
def test_a_batch_arrow_cannot_read_exactly_is_written_record_by_record(tmp_path: Path, odd: dict[str, object]) -> None:
    """Entries of another shape than the scripts write (an older version's, a hand-made one) still become records,
    as RequestMeta reads them."""
    entries = outbox_entries()
    entries[5] = orjson.dumps(orjson.loads(entries[5]) | odd).decode()
    assert entry_columns(entries) is None
    origin = OutboxOrigin("{wlm:EAST:PAYROLL}", "5f1c", first_position=0)
    assert write_outbox(str(tmp_path), entries, PERIODS, origin) == (len(entries), [])
    expected = outbox_table([RequestMeta.from_json(entry) for entry in entries], PERIODS)
    assert records.read(tmp_path).sort_by("token").to_pylist() == expected.sort_by("token").to_pylist()


def test_outbox_entries_of_an_unknown_policy_version_are_not_written(tmp_path: Path) -> None:
    origin = OutboxOrigin("{wlm:EAST:PAYROLL}", "5f1c", first_position=0)
    by_number = [orjson.dumps(orjson.loads(entry) | {"dep": 0}).decode() for entry in outbox_entries()]
    for entries in (outbox_entries(), by_number):  # the Arrow path, and the one record by record
        assert write_outbox(str(tmp_path), entries, {1: PERIODS[1]}, origin) == (0, [2])
    assert not any(tmp_path.iterdir())


def test_a_file_written_before_the_newer_columns_reads_them_as_null(tmp_path: Path) -> None:
    """Files written before `life` and `promoted` were added read beside newer ones, those columns null."""
    older = pa.schema([field for field in SCHEMA if field.name not in ("life", "promoted")])
    row = {**key(), "outcome": "completed", "ended_at": datetime(2026, 11, 1, tzinfo=UTC)}
    (tmp_path / "date=2026-11-01").mkdir()
    write_file(pa.Table.from_pylist([{**row, "token": "EAST~PAYROLL~old"}], schema=older), tmp_path / "date=2026-11-01" / "old.parquet")
    write(tmp_path, [{**row, "token": "EAST~PAYROLL~new", "life": 1, "promoted": True}])
    read = {r["token"]: (r["life"], r["promoted"]) for r in records.read(tmp_path).to_pylist()}
    assert read == {"EAST~PAYROLL~old": (None, None), "EAST~PAYROLL~new": (1, True)}


def test_the_writer_process_imports_no_web_database_or_policy_modules() -> None:
    """The records writer is a process of its own, spawned at every scheduler's start: what this module imports it
    pays for in CPU before the service is ready (the policy's schemas pulled in FastAPI and SQLAlchemy: 0.3 s)."""
    probe = "import sys, app.work.records; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split())
    assert not loaded & {"fastapi", "sqlalchemy", "pydantic", "redis", "starlette"}
    assert "pyarrow" in loaded
