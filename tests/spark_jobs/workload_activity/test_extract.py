"""Which days have files to read: a local day without a partition directory has none (the job then starts no
class-data archive); for other URIs Spark is asked."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from spark_jobs.workload_activity.extract import day_has_files, day_path

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
