"""Which days have files to read: a local day without a partition directory has none (the job then starts no
class-data archive); for other URIs Spark is asked. What the day's files declare in their footers: their group
keys (None where a file declares none, so the report reads the records for them), and the outbox ranges that
tell which files hold only records another file holds, and which can share no record with another."""

from __future__ import annotations

from concurrent.futures import Future
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from app.work.records import OutboxOrigin, write, write_file
from spark_jobs.contract.records import GROUP_KEYS, SCHEMA, day_has_files
from spark_jobs.workload_activity.extract import (
    Footer,
    day_files,
    day_footers,
    day_path,
    declared_group_keys,
    files_of_copies,
    files_without_copies,
    local_day_files,
    read_files,
    read_footer,
    read_footers,
    read_records,
)

DAY = date(2026, 11, 1)


def test_a_local_day_has_files_only_when_its_partition_exists(tmp_path: Path) -> None:
    assert not day_has_files(str(tmp_path), DAY)
    assert not day_has_files(f"file://{tmp_path}", DAY)
    Path(day_path(str(tmp_path), DAY)).mkdir()
    assert day_has_files(str(tmp_path), DAY)
    assert day_has_files(f"file://{tmp_path}/", DAY)


def test_a_remote_day_is_left_to_spark() -> None:
    assert day_has_files("s3a://bucket/records", DAY)
    assert day_has_files("hdfs://namenode/wlm/records", DAY)


def records_file(path: Path, *keys: tuple[str, str | None], declare: bool = True, ranges: list[dict] | None = None) -> None:
    """A records file at `path` with one record per (service class, report class) of `keys`."""
    rows = [
        dict(zip(GROUP_KEYS, ("PAYROLL", "EAST", service_class, 1, report_class, 1), strict=True)) | {"token": f"{path.name}-{i}"}
        for i, (service_class, report_class) in enumerate(keys)
    ]
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    path.parent.mkdir(parents=True, exist_ok=True)
    if declare:
        write_file(table, path, ranges or [])
    else:
        pq.write_table(table, path)


def footers(spark: SparkSession, root: Path) -> list[Footer]:
    return read_footers(read_records(spark, str(root), DAY).inputFiles())


def declared(spark: SparkSession, root: Path) -> set[tuple] | None:
    keys = declared_group_keys(footers(spark, root))
    return None if keys is None else {tuple(key[column] for column in GROUP_KEYS) for key in keys}


def test_the_day_s_group_keys_are_the_distinct_keys_its_files_declare(spark: SparkSession, tmp_path: Path) -> None:
    day = Path(day_path(str(tmp_path / "with space"), DAY))
    records_file(day / "part-1.parquet", ("ONLINE", "ATMA"), ("ONLINE", None))
    records_file(day / "part-2.parquet", ("ONLINE", "ATMA"), ("BATCH", None))
    assert declared(spark, tmp_path / "with space") == {
        ("PAYROLL", "EAST", "ONLINE", 1, "ATMA", 1),
        ("PAYROLL", "EAST", "ONLINE", 1, None, 1),
        ("PAYROLL", "EAST", "BATCH", 1, None, 1),
    }


def test_a_file_that_declares_nothing_leaves_the_keys_to_the_records(spark: SparkSession, tmp_path: Path) -> None:
    day = Path(day_path(str(tmp_path), DAY))
    records_file(day / "part-1.parquet", ("ONLINE", "ATMA"))
    records_file(day / "part-2.parquet", ("BATCH", None), declare=False)
    assert declared(spark, tmp_path) is None


def test_a_day_without_files_declares_no_keys(spark: SparkSession, tmp_path: Path) -> None:
    assert declared(spark, tmp_path) == set()


def test_a_footer_that_cannot_be_read_from_here_declares_nothing(tmp_path: Path) -> None:
    for uri in ("s3a://bucket/records/date=2026-11-01/part-1.parquet", (tmp_path / "gone.parquet").as_uri()):
        assert read_footer(uri) == Footer(uri, None, None)


def test_a_footer_that_declares_no_ranges_for_records_or_is_not_json_declares_nothing(tmp_path: Path) -> None:
    table = pa.Table.from_pylist([{"token": "a", "service_class": "ONLINE"}], schema=SCHEMA)
    for name, metadata in (("empty-ranges", {b"wlm.outbox_ranges": b"[]"}), ("garbled", {b"wlm.group_keys": b"[{"})):
        pq.write_table(table.replace_schema_metadata(metadata), tmp_path / name)
        footer = read_footer((tmp_path / name).as_uri())
        assert footer.outbox_ranges is None and footer.group_keys is None, name
    # A file without records has no range to declare (write_file leaves the key out) and shares none.
    write_file(SCHEMA.empty_table(), tmp_path / "empty")
    assert read_footer((tmp_path / "empty").as_uri()).outbox_ranges == []


def test_the_files_are_read_back_by_the_names_spark_gives_them(spark: SparkSession, tmp_path: Path) -> None:
    day = Path(day_path(str(tmp_path / "a b%41 é"), DAY))
    records_file(day / "part 1%.parquet", ("ONLINE", "ATMA"), ranges=[{"outbox": "{wlm:EAST:PAYROLL}", "first": 0, "last": 0}])
    records_file(day / "part-2.parquet", ("BATCH", None))
    [ranged, plain] = sorted(footers(spark, tmp_path / "a b%41 é"), key=lambda footer: footer.outbox_ranges is None)
    assert ranged.outbox_ranges == [{"outbox": "{wlm:EAST:PAYROLL}", "first": 0, "last": 0}] and plain.outbox_ranges is None
    assert [row.service_class for row in read_files(spark, [ranged.uri]).collect()] == ["ONLINE"]
    assert read_files(spark, []).count() == 0


def test_a_local_day_is_listed_as_spark_lists_it(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "a b%41 é"
    day = Path(day_path(str(root), DAY))
    for name in ("part 1%.parquet", "part-2.parquet", "_x=1.parquet", "_SUCCESS", ".hidden.parquet", "part-3.parquet._COPYING_"):
        records_file(day / name, ("ONLINE", None))
    (day / "_temporary").mkdir()  # hidden: neither lister looks inside
    records_file(day / "_temporary" / "part-4.parquet", ("ONLINE", None))
    for name in ("_metadata", "_common_metadata"):
        pq.write_metadata(SCHEMA, day / name)
    (day / "gone.parquet").symlink_to(day / "nowhere.parquet")
    listed = local_day_files(str(root), DAY)
    assert listed is not None
    # The same files (Spark leaves `=` and letters outside ASCII unescaped in its URIs, as_uri() does not).
    assert paths(listed) == paths(read_records(spark, str(root), DAY).inputFiles())
    assert {path.name for path in paths(listed)} == {"part 1%.parquet", "part-2.parquet", "_x=1.parquet", "_metadata", "_common_metadata"}
    assert sorted(listed) == sorted(local_day_files(f"file://{root}", DAY) or [])
    assert [row.service_class for row in read_files(spark, listed).collect()] == ["ONLINE"] * 3  # (the metadata files hold no rows)


def paths(uris: list[str]) -> set[Path]:
    return {Path(unquote(urlparse(uri).path)) for uri in uris}


def test_a_local_day_s_footers_are_read_without_waiting_for_the_session(tmp_path: Path) -> None:
    records_file(Path(day_path(str(tmp_path), DAY)) / "part-1.parquet", ("ONLINE", "ATMA"))
    starting: Future[SparkSession] = Future()  # a session still starting: never asked for, or this would wait
    [footer] = day_footers(str(tmp_path), DAY, starting)
    assert footer.group_keys == [dict(zip(GROUP_KEYS, ("PAYROLL", "EAST", "ONLINE", 1, "ATMA", 1), strict=True))]


def test_a_day_that_local_listing_leaves_to_spark(spark: SparkSession, tmp_path: Path) -> None:
    assert local_day_files(str(tmp_path), DAY) == []
    assert local_day_files("s3a://bucket/records", DAY) is None
    day = Path(day_path(str(tmp_path), DAY))
    records_file(day / "part-1.parquet", ("ONLINE", None))
    records_file(day / "hour=1" / "part-2.parquet", ("BATCH", None))
    assert local_day_files(str(tmp_path), DAY) is None
    session: Future[SparkSession] = Future()
    session.set_result(spark)
    assert paths([footer.uri for footer in day_footers(str(tmp_path), DAY, session)]) == {
        day / "part-1.parquet",
        day / "hour=1" / "part-2.parquet",
    }


def footer(name: str, *ranges: tuple[str, int, int], incarnation: str | None = "i1") -> Footer:
    return Footer(
        name, [], [{"outbox": outbox, "incarnation": incarnation, "first": first, "last": last} for outbox, first, last in ranges]
    )


@pytest.mark.parametrize(
    ("files", "without_copies"),
    [
        ([], set()),
        ([footer("a", ("X", 0, 9))], {"a"}),
        # Adjacent batches, one outbox: nothing shared.
        ([footer("a", ("X", 0, 9)), footer("b", ("X", 10, 19)), footer("c", ("X", 20, 20))], {"a", "b", "c"}),
        # A batch written twice (the same first position, the second one longer).
        ([footer("a", ("X", 0, 9)), footer("b", ("X", 0, 14)), footer("c", ("X", 15, 19))], {"c"}),
        # Overlapping by one position, in either order of the files.
        ([footer("b", ("X", 9, 19)), footer("a", ("X", 0, 9))], set()),
        # One range inside another, with a file after both that overlaps only the outer one.
        ([footer("a", ("X", 0, 100)), footer("b", ("X", 10, 20)), footer("c", ("X", 50, 150)), footer("d", ("X", 151, 160))], {"d"}),
        # The same positions of different outboxes are different records.
        ([footer("a", ("X", 0, 9)), footer("b", ("Y", 0, 9))], {"a", "b"}),
        # A file of several outboxes shares a record if any of its ranges overlaps.
        ([footer("a", ("X", 0, 9), ("Y", 0, 9)), footer("b", ("Y", 5, 5)), footer("c", ("X", 10, 19))], {"c"}),
        # A file that declares no ranges could hold a copy of anything.
        ([footer("a", ("X", 0, 9)), Footer("b", [], None)], set()),
        # A file with no records (read_footer lets only those declare no ranges) shares none.
        ([footer("a", ("X", 0, 9)), footer("b")], {"a", "b"}),
    ],
)
def test_files_that_can_share_no_record(files: list[Footer], without_copies: set[str]) -> None:
    assert files_without_copies(files) == without_copies


@pytest.mark.parametrize(
    ("files", "not_read"),
    [
        ([], set()),
        ([footer("a", ("X", 0, 9))], set()),
        # A batch written again after a crash starts at the same position; the second write is longer if the
        # outbox grew in between. Either order of the files.
        ([footer("a", ("X", 0, 9)), footer("b", ("X", 0, 14))], {"a"}),
        ([footer("b", ("X", 0, 14)), footer("a", ("X", 0, 9))], {"a"}),
        # Written again as it was: the first by name is read.
        ([footer("b", ("X", 0, 9)), footer("a", ("X", 0, 9))], {"b"}),
        ([footer("c", ("X", 0, 9)), footer("a", ("X", 0, 9)), footer("b", ("X", 0, 9))], {"b", "c"}),
        # Inside a range that is itself inside another: only the outermost is read.
        ([footer("a", ("X", 0, 100)), footer("b", ("X", 10, 20)), footer("c", ("X", 10, 20)), footer("d", ("X", 5, 50))], {"b", "c", "d"}),
        # Overlapping without one holding the other: both are read (and searched for copies).
        ([footer("a", ("X", 0, 9)), footer("b", ("X", 5, 14))], set()),
        # Covered only by two files together: read.
        ([footer("a", ("X", 0, 9)), footer("b", ("X", 5, 14)), footer("c", ("X", 3, 12))], set()),
        # The same positions of different outboxes are different records.
        ([footer("a", ("X", 0, 9)), footer("b", ("Y", 0, 9))], set()),
        # A file of several outboxes is left out only if every range of it is held by another file.
        ([footer("a", ("X", 0, 9), ("Y", 0, 9)), footer("b", ("X", 0, 20))], set()),
        ([footer("a", ("X", 0, 9), ("Y", 0, 9)), footer("b", ("X", 0, 20)), footer("c", ("Y", 0, 30))], {"a"}),
        # A file without ranges could hold anything, and is read; one with no records (no ranges to declare) need not be.
        ([footer("a", ("X", 0, 9)), Footer("b", [], None)], set()),
        ([footer("a", ("X", 0, 9)), footer("b")], {"b"}),
        # Positions counted again from 0 (Redis lost the outbox: another incarnation) are other records.
        ([footer("a", ("X", 0, 9)), footer("b", ("X", 0, 14), incarnation="i2")], set()),
        # A range of no known incarnation is never taken for held by another file, nor makes one held.
        ([footer("a", ("X", 0, 9), incarnation=None), footer("b", ("X", 0, 14))], set()),
        ([footer("a", ("X", 0, 9)), footer("b", ("X", 0, 14), incarnation=None)], set()),
        # A range a file declares twice is still one range, which no other file holds.
        ([footer("a", ("X", 1, 7), ("X", 1, 7))], set()),
    ],
)
def test_files_whose_records_another_file_holds_are_not_read(files: list[Footer], not_read: set[str]) -> None:
    assert files_of_copies(files) == not_read


def test_a_day_s_records_are_read_once_each_from_the_files_the_service_writes(spark: SparkSession, tmp_path: Path) -> None:
    moment = datetime(DAY.year, DAY.month, DAY.day, 12, tzinfo=UTC)
    rows = [
        dict(zip(GROUP_KEYS, ("PAYROLL", "EAST", "ONLINE", 1, None, 1), strict=True))
        | {"token": f"t{i}", "ended_at": moment + timedelta(seconds=i)}
        for i in range(40)
    ]

    def written(batch: list[dict], first: int, incarnation: str = "i1") -> None:
        write(tmp_path, batch, OutboxOrigin("{wlm:EAST:PAYROLL}", incarnation, first))

    written(rows[:10], 0)  # a crash before the batch left the outbox:
    written(rows[:15], 0)  # written again, with the records that came since
    # Two flushers at once (a lease ran out): the first writes 15..19 and drops them from the outbox; the second
    # read 15..22 before that, writes them, fails to drop them, reads again from 20 and writes 20..29.
    written(rows[15:20], 15)
    written(rows[15:23], 15)
    written(rows[20:30], 20)
    # Redis lost the outbox: its positions start again at 0, for other records.
    written(rows[30:36], 0, incarnation="i2")
    written(rows[36:], 30)  # and the first incarnation's last batch before that

    files = day_files(footers(spark, tmp_path))
    assert (len(files.not_read), len(files.searched), len(files.copy_free)) == (2, 4, 1)
    searched = [row.token for row in read_files(spark, files.searched).collect()]
    copy_free = [row.token for row in read_files(spark, files.copy_free).collect()]
    assert sorted(copy_free) == sorted(set(copy_free)) and not set(copy_free) & set(searched)
    assert set(copy_free) | set(searched) == {row["token"] for row in rows}


def test_files_written_before_the_newer_columns_are_read_beside_newer_ones(spark: SparkSession, tmp_path: Path) -> None:
    day = Path(day_path(str(tmp_path), DAY))
    day.mkdir(parents=True)
    older = pa.schema([field for field in SCHEMA if field.name not in ("life", "promoted")])
    row = dict(zip(GROUP_KEYS, ("PAYROLL", "EAST", "BATCH", 1, None, 1), strict=True))
    write_file(pa.Table.from_pylist([{**row, "token": "old"}], schema=older), day / "part-old.parquet")
    write_file(pa.Table.from_pylist([{**row, "token": "new", "life": 2, "promoted": True}], schema=SCHEMA), day / "part-new.parquet")
    assert sorted((r.token, r.life) for r in read_records(spark, str(tmp_path), DAY).collect()) == [("new", 2), ("old", None)]
