"""Shared by the benchmarks: the work records a service wrote, as the proof that a request ended (a server's view
misses an end whose answer was cut off)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from app.work import records


def completed(data_dir: Path) -> set[str]:
    """The tokens of the completion records under a service's data directory."""
    table = records.read(data_dir / "records")
    return set(table.filter(pc.equal(table["outcome"], "completed"))["token"].to_pylist())


def ends(data_dir: Path, application_environment: str) -> list[tuple[str, float, float]]:
    """(service class, inserted, ended) of every request of the environment that has its record, whatever its
    outcome, in seconds since the epoch (the records keep milliseconds)."""
    table = records.read(data_dir / "records")
    table = table.filter(pc.equal(table["application_environment"], application_environment))
    inserted = table["inserted_at"].cast(pa.int64()).to_pylist()
    ended = table["ended_at"].cast(pa.int64()).to_pylist()
    return [(name, i / 1000, e / 1000) for name, i, e in zip(table["service_class"].to_pylist(), inserted, ended, strict=True)]


async def without_record(data_dir: Path, tokens: set[str], seconds: float) -> set[str]:
    """Those of `tokens` without a completion record once all have one (the service flushes its records every
    WLM_RECORDS_FLUSH_SECONDS) or `seconds` passed."""
    deadline = time.monotonic() + seconds
    while (missing := tokens - await asyncio.to_thread(completed, data_dir)) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    return missing
