"""Parquet files written at least once and read as a downstream reader reads them (the work records, the delay
samples): each write a new part file, durable when it returns and never seen half written; a read of every part with
the copies that at-least-once writing leaves dropped."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spark_jobs.common.durable_files import put_in_place


def write_part(directory: Path, write: Callable[[Path], None], kind: str = "") -> Path:
    """A new part file in `directory` (made if missing): `write` writes it under a temporary name, which is fsynced,
    renamed to its part name (`part-<ms written>-<random>[-kind].parquet`), and its directory fsynced. Returns the
    part's path."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"part-{int(datetime.now(UTC).timestamp() * 1000)}-{uuid.uuid4().hex[:12]}{f'-{kind}' if kind else ''}.parquet"
    temporary, final = directory / f".{name}.tmp", directory / name
    write(temporary)
    put_in_place(temporary, final)
    return final


def written_ms(part: Path) -> int | None:
    """When `part` was written (ms since the epoch), from its name; None for a file write_part did not name."""
    fields = part.name.split("-")
    return int(fields[1]) if len(fields) >= 3 and fields[0] == "part" and fields[1].isdigit() else None


def read_parts(root: Path, schema: pa.Schema, copy_keys: Callable[[pa.Table], Iterable[Hashable]]) -> pa.Table:
    """Every row of the parts under `root`/date=*/, read in `schema`; of the rows with the same copy key (one per
    row, in order), the first kept."""
    files = sorted(root.glob("date=*/*.parquet"))
    if not files:
        return schema.empty_table()
    table = pa.concat_tables(pq.read_table(f, schema=schema) for f in files)
    seen: set[Hashable] = set()
    keep = []
    for index, key in enumerate(copy_keys(table)):
        if key not in seen:
            seen.add(key)
            keep.append(index)
    return table.take(keep)
