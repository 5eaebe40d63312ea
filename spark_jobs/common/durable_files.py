"""Files a reader never sees half written: each is written under a hidden name, fsynced, renamed into place, and its
directory fsynced (the service's work records and delay samples, app/shared/parquet_parts.py; the report's Parquet,
spark_jobs/workload_activity/load.py). Here, not in the service, because the jobs import nothing of it."""

from __future__ import annotations

import os
from pathlib import Path


def fsync(path: Path) -> None:
    """`path` (a file or a directory) on disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def put_in_place(temporary: Path, final: Path) -> None:
    """`temporary`, written in `final`'s directory, as `final`: on disk before it is renamed, and the rename on disk
    when this returns."""
    fsync(temporary)
    os.replace(temporary, final)
    fsync(final.parent)
