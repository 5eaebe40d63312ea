"""Reading what the report needs: a day of work records (Parquet, any URI Spark reads) and the policy versions."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse, urlunparse

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow.fs import FileSystem, FileType
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.contract.delay_samples import SCHEMA as DELAY_SAMPLES_SCHEMA
from spark_jobs.contract.records import GROUP_KEYS, GROUP_KEYS_FOOTER, OUTBOX_RANGES_FOOTER, SCHEMA, day_has_files, day_path
from spark_jobs.workload_activity.delays import SAMPLE_COLUMNS
from spark_jobs.workload_activity.tables import empty_table
from spark_jobs.workload_activity.transform import RECORD_COLUMNS

# Spark's names of the types the records' columns have in their files.
_SPARK_TYPES = {
    pa.string(): "STRING",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.bool_(): "BOOLEAN",
    pa.timestamp("ms", tz="UTC"): "TIMESTAMP",
}


def record_types(columns: Sequence[str]) -> dict[str, str]:
    """Records' `columns` in Spark's types. Given explicitly, so a day without records reads as an empty table
    instead of failing to infer a schema."""
    return {name: _SPARK_TYPES[SCHEMA.field(name).type] for name in columns}


def _schema(types: dict[str, str]) -> str:
    return ", ".join(f"{name} {spark_type}" for name, spark_type in types.items())


# The columns the report reads.
RECORD_TYPES = record_types(RECORD_COLUMNS)
RECORDS_SCHEMA = _schema(RECORD_TYPES)
# Times the delay samples are listed and read, if a file listed is gone before it is read.
SAMPLES_LISTINGS = 3
# Footers are read a few at a time: from a remote store each read is a round trip.
FOOTER_READERS = 8


def read_records(spark: SparkSession, records_uri: str, report_date: date, types: dict[str, str] = RECORD_TYPES) -> DataFrame:
    """The records of `report_date` (its partition), their columns of `types`, or an empty table when the day has none."""
    path = day_path(records_uri, report_date)
    if not day_has_files(records_uri, report_date):
        return empty_table(spark, types)
    try:
        return spark.read.schema(_schema(types)).parquet(path)
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc):
            return empty_table(spark, types)
        raise


def read_files(spark: SparkSession, uris: Sequence[str], types: dict[str, str] = RECORD_TYPES) -> DataFrame:
    """The records of the files at `uris` (as `DataFrame.inputFiles` names them: percent-encoded URIs, which
    Spark reads as paths once decoded), their columns of `types`."""
    if not uris:
        return empty_table(spark, types)
    paths = [f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}" for parsed in map(urlparse, uris)]
    return spark.read.schema(_schema(types)).parquet(*paths)


def local_day_files(records_uri: str, report_date: date) -> list[str] | None:
    """The URIs of the day's files (percent-encoded, as read_files and read_footer take them) when its partition is a
    local directory, listed as Spark lists one: names starting with `.`, or with `_` and without `=` (but for Parquet's
    `_metadata` and `_common_metadata`), are not data, nor is a file being copied or a link to nothing. [] for a
    partition that does not exist; None elsewhere, or where the partition holds a directory: Spark lists those
    (day_footers)."""
    parsed = urlparse(day_path(records_uri, report_date))
    if parsed.scheme not in ("", "file"):
        return None
    try:
        uris = []
        for entry in os.scandir(parsed.path):
            if not _spark_lists(entry.name):
                continue
            if entry.is_dir():
                return None
            if entry.is_file():
                uris.append(Path(os.path.abspath(entry.path)).as_uri())
    except FileNotFoundError:
        return []
    except OSError:
        return None
    return uris


def _spark_lists(name: str) -> bool:
    """Whether Spark's listing of a directory keeps a file named `name` (HadoopFSUtils.shouldFilterOutPathName)."""
    hidden = name.startswith(".") or (name.startswith("_") and "=" not in name) or name.endswith("._COPYING_")
    return not hidden or name.startswith(("_metadata", "_common_metadata"))


def day_footers(records_uri: str, report_date: date, session: Future[SparkSession]) -> list[Footer]:
    """The footers of the day's files: a local partition is listed here, while the session may still be starting;
    any other, by Spark once `session` has started."""
    uris = local_day_files(records_uri, report_date)
    if uris is None:
        uris = read_records(session.result(), records_uri, report_date).inputFiles()
    return read_footers(uris)


def read_day_files(spark: SparkSession, files: DayFiles, types: dict[str, str] = RECORD_TYPES) -> tuple[DataFrame | None, DataFrame | None]:
    """The day's records (`day_files`) to search for copies, and those known to share none with another file: None
    where there are no such files, never both (a day without files is an empty table of copy-free records)."""
    searched = read_files(spark, files.searched, types) if files.searched else None
    copy_free = read_files(spark, files.copy_free, types) if files.copy_free or not files.searched else None
    return searched, copy_free


def read_delay_samples(samples_uri: str, report_date: date) -> pa.Table | None:
    """Blocking: the delay samples of `report_date` (its partition, read on the driver: see delays.py), their
    SAMPLE_COLUMNS; None when the day has none, or pyarrow cannot read from where they are (s3a://, say)."""
    for _ in range(SAMPLES_LISTINGS):
        try:
            filesystem, path = FileSystem.from_uri(_escaped(day_path(samples_uri, report_date)))
            if filesystem.get_file_info(path).type != FileType.Directory:
                return None
            table = ds.dataset(path, filesystem=filesystem, format="parquet", schema=DELAY_SAMPLES_SCHEMA).to_table(
                columns=list(SAMPLE_COLUMNS)
            )
        except FileNotFoundError:
            continue  # a file listed was merged into another and removed (app/servers/delay_records.compact): list again
        except (OSError, ValueError, pa.ArrowException):
            return None
        return table if table.num_rows else None
    return None


def _escaped(uri: str) -> str:
    """`uri` as pyarrow wants it: Spark leaves characters outside ASCII unescaped in its URIs."""
    parsed = urlparse(uri if urlparse(uri).scheme else Path(uri).resolve().as_uri())
    return urlunparse(parsed._replace(path=quote(unquote(parsed.path))))


@dataclass(frozen=True, slots=True)
class Footer:
    """What a records file declares (app.work.records.write_file); None where it declares nothing, or its
    footer cannot be read from here (a file system pyarrow does not know, such as s3a://)."""

    uri: str
    group_keys: list[dict[str, Any]] | None
    outbox_ranges: list[dict[str, Any]] | None


def read_footers(uris: Sequence[str]) -> list[Footer]:
    with ThreadPoolExecutor(FOOTER_READERS) as pool:
        return list(pool.map(read_footer, uris))


def read_footer(uri: str) -> Footer:
    try:
        filesystem, path = FileSystem.from_uri(_escaped(uri))
        footer = pq.read_metadata(path, filesystem=filesystem)
        metadata = footer.metadata or {}
        group_keys, outbox_ranges = (
            json.loads(metadata[key]) if key in metadata else None for key in (GROUP_KEYS_FOOTER, OUTBOX_RANGES_FOOTER)
        )
    except (OSError, ValueError, pa.ArrowException):
        return Footer(uri, None, None)
    # No ranges for a file with records (not one the service wrote) would make it seem to share none; a file
    # without records shares none.
    return Footer(uri, group_keys, outbox_ranges if outbox_ranges else ([] if footer.num_rows == 0 else None))


def declared_group_keys(footers: Sequence[Footer]) -> list[dict[str, Any]] | None:
    """The group keys (GROUP_KEYS) the files declare, distinct; None when a file declares none: the report then
    finds its groups by reading the records a second time."""
    if any(footer.group_keys is None for footer in footers):
        return None
    distinct = {tuple(key.get(column) for column in GROUP_KEYS) for footer in footers for key in footer.group_keys or ()}
    return [dict(zip(GROUP_KEYS, key, strict=True)) for key in distinct]


def files_of_copies(footers: Sequence[Footer]) -> set[str]:
    """The files that need not be read: each of their outbox ranges lies within a range of the same outbox and
    incarnation in another file, which holds every record of its range (of the day). A batch the service writes
    again after a crash starts where its first write started, so of the two files one holds the other. Of files
    with equal ranges, the first by name is read. (Containment, ties broken by name, is a strict order: following
    it from any range ends at a range nothing contains, whose file is read.) A range without an incarnation (an
    earlier version's file, or another writer's) never makes a file skipped: its positions may have been counted
    again from 0 since."""
    by_outbox: dict[tuple[str, str], list[tuple[int, int, str]]] = defaultdict(list)
    for footer in footers:
        # A range the file declares twice is one range (containing itself, it would seem held by another file).
        for outbox, incarnation, first, last in {_range_of(declared) for declared in footer.outbox_ranges or ()}:
            if incarnation is not None:
                by_outbox[(outbox, incarnation)].append((first, last, footer.uri))
    contained: set[tuple[str, str | None, int, int, str]] = set()
    for (outbox, incarnation), ranges in by_outbox.items():
        # Sorted so that every range that could contain one comes before it: the largest last seen so far decides.
        ranges.sort(key=lambda declared: (declared[0], -declared[1], declared[2]))
        latest_end = None
        for first, last, uri in ranges:
            if latest_end is not None and last <= latest_end:
                contained.add((outbox, incarnation, first, last, uri))
            latest_end = last if latest_end is None else max(latest_end, last)
    return {
        footer.uri
        for footer in footers
        if footer.outbox_ranges is not None and all((*_range_of(declared), footer.uri) in contained for declared in footer.outbox_ranges)
    }


def _range_of(declared: dict[str, Any]) -> tuple[str, str | None, int, int]:
    return declared["outbox"], declared.get("incarnation"), declared["first"], declared["last"]


def files_without_copies(footers: Sequence[Footer]) -> set[str]:
    """The files no other file shares a record with: each of their outbox ranges overlaps no other file's range
    of that outbox, whatever their incarnations (positions counted again from 0 overlap earlier ones: searching
    those files for copies costs time, never a record). A batch of an outbox holds each record once, so such a
    file holds no copies either. None at all when a file declares no ranges: it could hold a copy of any record."""
    if any(footer.outbox_ranges is None for footer in footers):
        return set()
    by_outbox: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for footer in footers:
        for declared in footer.outbox_ranges or ():
            by_outbox[declared["outbox"]].append((declared["first"], declared["last"], footer.uri))
    sharing: set[str] = set()
    for ranges in by_outbox.values():
        ranges.sort()
        latest_end = None  # the largest last position of the ranges before this one
        for index, (first, last, uri) in enumerate(ranges):
            overlaps_earlier = latest_end is not None and first <= latest_end
            overlaps_later = index + 1 < len(ranges) and ranges[index + 1][0] <= last
            if overlaps_earlier or overlaps_later:
                sharing.add(uri)
            latest_end = last if latest_end is None else max(latest_end, last)
    return {footer.uri for footer in footers} - sharing


@dataclass(frozen=True, slots=True)
class DayFiles:
    """How the report reads a day's files: `copy_free` are summed as they are read, `searched` are searched for
    copies, `not_read` hold only records that another file read holds."""

    not_read: list[str]
    searched: list[str]
    copy_free: list[str]


def day_files(footers: Sequence[Footer]) -> DayFiles:
    """The day's files (`read_footers`) sorted into those not read, those searched for copies and the rest."""
    not_read = files_of_copies(footers)
    read = [footer for footer in footers if footer.uri not in not_read]
    copy_free = files_without_copies(read)
    return DayFiles(sorted(not_read), sorted(footer.uri for footer in read if footer.uri not in copy_free), sorted(copy_free))
