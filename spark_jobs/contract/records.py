"""The work records' Parquet files as the service writes them (app/work/records.py) and the report reads them
(spark_jobs/workload_activity/extract.py). docs/work-records.md describes each column."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa

_TS = pa.timestamp("ms", tz="UTC")
SCHEMA = pa.schema(
    [
        ("token", pa.string()),
        ("application_environment", pa.string()),
        ("node", pa.string()),
        ("service_class", pa.string()),
        ("period", pa.int32()),
        ("report_class", pa.string()),
        ("policy_version", pa.int32()),
        ("queue_manager_id", pa.int64()),
        ("subsystem_type", pa.string()),
        ("subsystem_name", pa.string()),
        ("server_id", pa.int64()),
        ("userid", pa.string()),
        ("enclave", pa.string()),
        ("dependent", pa.bool_()),
        ("outcome", pa.string()),
        ("deliveries", pa.int32()),
        ("inserted_at", _TS),
        ("selected_at", _TS),
        ("begun_at", _TS),
        ("ended_at", _TS),
        ("response_time_ms", pa.int64()),
        ("queue_time_ms", pa.int64()),
        ("execution_time_ms", pa.int64()),
        ("result", pa.string()),
        # 1 for a request's first life; each retry of its dead letter lives again under the same token, counted up.
        # Null in files written before it was added: read as 1.
        ("life", pa.int32()),
        # True when the select of the delivery that ended it was a blocked workload promotion (docs/scheduler.md).
        # Null in files written before it was added.
        ("promoted", pa.bool_()),
    ]
)


DAY_PARTITION = "date="


def day_path(records_uri: str, day: date) -> str:
    """The partition of `day`'s records (of the UTC date they ended on) under `records_uri`."""
    return f"{records_uri.rstrip('/')}/{DAY_PARTITION}{day.isoformat()}"


def day_has_files(records_uri: str, report_date: date) -> bool:
    """False when the day's partition is a local directory that does not exist (elsewhere: Spark will tell)."""
    path = day_path(records_uri, report_date)
    return urlparse(path).scheme not in ("", "file") or Path(urlparse(path).path).is_dir()


def partition_day(name: str) -> date | None:
    """The day a partition's name (the last part of its day_path) stands for; None for any other name."""
    if not name.startswith(DAY_PARTITION):
        return None
    try:
        return date.fromisoformat(name.removeprefix(DAY_PARTITION))
    except ValueError:
        return None


# Each file's footer declares the distinct values of these columns among its records, as JSON under
# GROUP_KEYS_FOOTER: the nightly report's groups, which it can then name without reading the records twice.
GROUP_KEYS = ("application_environment", "node", "service_class", "period", "report_class", "policy_version")
GROUP_KEYS_FOOTER = b"wlm.group_keys"
# A file of records from the service's outboxes declares, per outbox, the first and last position of its records
# there (lua/ack_records.lua): copies of a record (a batch written twice) are only ever in files whose ranges of
# one outbox overlap, so a reader needs to drop duplicates among those files alone. Each range also names the
# outbox's incarnation (a random id the outbox keeps in Redis with its count, lua/pending_records.lua): if Redis
# lost the count, positions start again at 0 under a new one, and a reader must not take them for the same records.
OUTBOX_RANGES_FOOTER = b"wlm.outbox_ranges"
