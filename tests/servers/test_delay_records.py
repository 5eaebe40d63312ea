"""The delay samples kept (app/servers/delay_records.py): rows in the contract's schema, written as Parquet files and
read back with copies dropped; the totals per environment, class, period and state, in Redis and as /metrics shows
them."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq

from app.health.metrics import delay_exposition
from app.redis.context import RedisContext
from app.servers.delay_records import (
    COMPACTED,
    DelayTotals,
    compact,
    parse_total_field,
    read,
    rows_table,
    total_field,
    totals_of,
    write,
)
from app.servers.delay_samples import MINUTE_MS, added
from spark_jobs.contract.delay_samples import DEDUP_KEY, SCHEMA, STATE_COLUMNS

DAY_END = 1_764_201_540_000  # 2025-11-26 23:59 UTC: the last minute of a day
ROWS = [
    (DAY_END, ("PAYROLL", "LOCAL", "ONLINE", 1), added(added(None, {"no_server": 2}), {"using": 1, "busy_higher": 1})),
    (DAY_END + MINUTE_MS, ("PAYROLL", "LOCAL", "ONLINE", 1), added(None, {"servers_starting": 3})),
    (DAY_END + MINUTE_MS, ("PAYROLL", "LOCAL", "BATCH", 2), added(None, {"using": 4})),
]


def test_the_schema_names_each_state_and_the_key_its_columns() -> None:
    assert SCHEMA.names[-len(STATE_COLUMNS) :] == list(STATE_COLUMNS)
    assert set(DEDUP_KEY) <= set(SCHEMA.names) and "day" not in DEDUP_KEY


def test_rows_written_per_day_and_read_back_once(tmp_path: Path) -> None:
    table = rows_table(ROWS, "wlm-1", 7)
    assert table.schema == SCHEMA
    first = table.slice(0, 1).to_pylist()[0]
    assert first["minute"] == datetime.fromtimestamp(DAY_END / 1000, UTC) and first["day"] == date(2025, 11, 26)
    assert (first["samples"], first["using"], first["no_server"], first["busy_higher"], first["unknown"]) == (2, 1, 2, 1, 0)
    assert (first["scheduler"], first["epoch"]) == ("wlm-1", 7)

    files = write(tmp_path, table)
    assert sorted(f.parent.name for f in files) == ["date=2025-11-26", "date=2025-11-27"]
    assert all(pq.read_schema(f).names == SCHEMA.names for f in files) and not list(tmp_path.rglob(".*.tmp"))
    write(tmp_path, rows_table(ROWS[1:2], "wlm-1", 7))  # written again: at least once
    write(tmp_path, rows_table(ROWS[1:2], "wlm-2", 8))  # another scheduler's samples of the same minute: its own row
    back = read(tmp_path).sort_by([("minute", "ascending"), ("service_class", "ascending"), ("scheduler", "ascending")])
    assert [(r["service_class"], r["scheduler"], r["samples"]) for r in back.to_pylist()] == [
        ("ONLINE", "wlm-1", 2),
        ("BATCH", "wlm-1", 1),
        ("ONLINE", "wlm-1", 1),
        ("ONLINE", "wlm-2", 1),
    ]
    assert read(tmp_path / "none").num_rows == 0


def test_the_minute_files_of_the_last_hours_days_merged_into_one_the_rest_kept(tmp_path: Path) -> None:
    now_minute = int(datetime.now(UTC).timestamp() * 1000) // MINUTE_MS * MINUTE_MS
    rows = [(now_minute, queue, counts) for _, queue, counts in ROWS]
    write(tmp_path, rows_table(rows, "wlm-1", 7))
    write(tmp_path, rows_table(rows[:1], "wlm-1", 7))  # a copy: merged as it is, dropped by readers
    write(tmp_path, rows_table(ROWS, "wlm-1", 7))  # days long before the hours merged: left as they are
    merged_at = datetime.now(UTC) + timedelta(milliseconds=1)
    time.sleep(0.005)
    write(tmp_path, rows_table(rows[2:], "wlm-2", 8))  # written after the hour's start: left for the next merge
    before = sorted(map(str, read(tmp_path).to_pylist()))

    merged = compact(tmp_path, merged_at)
    today = tmp_path / f"date={datetime.fromtimestamp(now_minute / 1000, UTC).date().isoformat()}"
    assert [part.parent for part in merged] == [today] and merged[0].stem.endswith(f"-{COMPACTED}")
    assert len(list(today.glob("*.parquet"))) == 2
    assert [len(list((tmp_path / day).glob("*.parquet"))) for day in ("date=2025-11-26", "date=2025-11-27")] == [1, 1]
    assert sorted(map(str, read(tmp_path).to_pylist())) == before
    assert compact(tmp_path, merged_at) == []  # nothing left to merge


def test_totals_per_environment_class_period_and_state() -> None:
    assert totals_of(ROWS) == {
        "PAYROLL|ONLINE|1|no_server": 2,
        "PAYROLL|ONLINE|1|using": 1,
        "PAYROLL|ONLINE|1|busy_higher": 1,
        "PAYROLL|ONLINE|1|servers_starting": 3,
        "PAYROLL|BATCH|2|using": 4,
    }
    assert parse_total_field(total_field("A|B", "ONLINE", 2, "using")) == ("A|B", "ONLINE", "2", "using")


async def test_totals_add_up_in_redis_and_show_as_counters(redis_context: RedisContext) -> None:
    totals = DelayTotals(redis_context)
    assert await totals.read() == {} and delay_exposition({}) == ""
    await totals.add(totals_of(ROWS))
    await totals.add({"PAYROLL|ONLINE|1|no_server": 5})
    kept = await totals.read()
    assert kept["PAYROLL|ONLINE|1|no_server"] == 7 and kept["PAYROLL|BATCH|2|using"] == 4
    text = delay_exposition(kept)
    assert "# TYPE wlm_delay_samples counter" in text
    assert 'wlm_delay_samples_total{application_environment="PAYROLL",service_class="ONLINE",period="1",cause="no_server"} 7\n' in text
    assert text.count("wlm_delay_samples_total{") == 5
