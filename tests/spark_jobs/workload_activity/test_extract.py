"""Which days have files to read: a local day without a partition directory has none (the job then starts no
class-data archive); for other URIs Spark is asked. The group keys the day's files declare in their footers, or
None where a file declares none, so the report reads the records for them."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from app.work.records import GROUP_KEYS, SCHEMA, write_file
from spark_jobs.workload_activity.extract import day_has_files, day_path, declared_group_keys, footer_group_keys, read_records

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


def records_file(path: Path, *keys: tuple[str, str | None], declare: bool = True) -> None:
    """A records file at `path` with one record per (service class, report class) of `keys`."""
    rows = [
        dict(zip(GROUP_KEYS, ("PAYROLL", "EAST", service_class, 1, report_class, 1), strict=True)) | {"token": f"{path.name}-{i}"}
        for i, (service_class, report_class) in enumerate(keys)
    ]
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    path.parent.mkdir(parents=True, exist_ok=True)
    if declare:
        write_file(table, path)
    else:
        pq.write_table(table, path)


def declared(spark: SparkSession, root: Path) -> set[tuple] | None:
    keys = declared_group_keys(spark, read_records(spark, str(root), DAY))
    return None if keys is None else {tuple(row) for row in keys.collect()}


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
    assert footer_group_keys("s3a://bucket/records/date=2026-11-01/part-1.parquet") is None
    assert footer_group_keys((tmp_path / "gone.parquet").as_uri()) is None
