"""The what-if replay's CPU per request without Spark: the synthetic day of `bench/whatif.py`'s scale step
(bench/_report_data.py, the example policy as candidate and as the recorded version), each environment's records
selected as the job selects them (ended that day, copies dropped by token and life, sorted as `job.by_environment`
sorts them) and fed as the job feeds them (`replay.task_table`: TASK_SCHEMA, in Arrow batches of
`replay.CHUNK`) to the task's own function (`replay.replay_batches`), its CPU time measured in this process. What it
leaves out is Spark's side: reading, the shuffle, and the batches' transfer into the Python task.

    .venv/bin/python bench/whatif_replay_cpu.py [--records 1000000] [--limit N] [--output DIR]
    .venv/bin/python bench/whatif_replay_cpu.py --smoke     # a day of 4,000 records

--limit replays the first N requests of each environment (the 10 M day's PAYROLL is saturated: its queue grows all
day); --output writes each environment's result JSON there, to compare two versions byte for byte. Last line: one
JSON object, per environment its requests, CPU seconds and microseconds per request; the exit status is 1 when an
environment replayed nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from _report_data import ENVIRONMENTS, generate
from _service import ROOT
from whatif import SCALE_DAY

from app.policy.service import checked_candidate
from spark_jobs.what_if.model import ManagerSettings
from spark_jobs.what_if.replay import CHUNK, REPLAY_COLUMNS, TIMES, ReplayInputs, replay_batches, task_table

HEADLINE = ("us_per_request",)


def selected(records: Path) -> pa.Table:
    """The day's records as `extract.replay_rows` selects them: the environment and REPLAY_COLUMNS, times in ms."""
    table = pq.read_table(sorted(records.glob(f"date={SCALE_DAY}/*.parquet")))
    start_ms = int(datetime(SCALE_DAY.year, SCALE_DAY.month, SCALE_DAY.day, tzinfo=UTC).timestamp() * 1000)
    times = {f"{time}_ms": pc.cast(pc.cast(table[f"{time}_at"], pa.timestamp("ms", tz="UTC")), pa.int64()) for time in TIMES}
    columns = {name: table[name] for name in ("token", "life", "application_environment", *REPLAY_COLUMNS) if name not in times}
    rows = pa.table(columns | times)
    rows = rows.filter(pc.and_(pc.greater_equal(rows["ended_ms"], start_ms), pc.less(rows["ended_ms"], start_ms + 86_400_000)))
    lives = pc.cast(pc.fill_null(rows["life"], 1), pa.string())
    _, first = np.unique(pc.binary_join_element_wise(rows["token"], lives, "|").to_numpy(zero_copy_only=False), return_index=True)
    return rows.take(pa.array(np.sort(first)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="the synthetic day's requests")
    parser.add_argument("--limit", type=int, default=0, help="replay only each environment's first N requests")
    parser.add_argument("--output", type=Path, help="a directory for each environment's result JSON")
    parser.add_argument("--smoke", action="store_true", help="a day of 4,000 records")
    args = parser.parse_args()
    if args.smoke:
        args.records = 4_000
    candidate = checked_candidate((ROOT / "examples" / "policy.yaml").read_bytes(), "application/yaml", 1 << 20, 86_400_000)
    inputs = ReplayInputs(
        candidate=candidate,
        recorded={1: candidate},
        day_start=datetime(SCALE_DAY.year, SCALE_DAY.month, SCALE_DAY.day, tzinfo=UTC),
        settings=ManagerSettings(),
        start_latencies_s=(),
        seed=0,
    )
    with tempfile.TemporaryDirectory(prefix="wlm-replay-cpu-") as scratch:
        generate(Path(scratch), SCALE_DAY, args.records)
        rows = selected(Path(scratch))
    figures = {}
    for name in ENVIRONMENTS:
        of = rows.filter(pc.equal(rows["application_environment"], name)).select(["application_environment", *REPLAY_COLUMNS])
        of = of.sort_by([(column, "ascending") for column in ("inserted_ms", *(c for c in REPLAY_COLUMNS if c != "inserted_ms"))])
        if args.limit:
            of = of.slice(0, args.limit)
        records = task_table(of.to_pylist())
        started = time.process_time()
        result = next(replay_batches(0, records.to_batches(CHUNK), [name], inputs, {}), "{}")
        cpu_s = time.process_time() - started
        per_request = cpu_s / max(1, len(records)) * 1e6
        figures[name] = {
            "requests": len(records),
            "arrivals": json.loads(result).get("arrivals", 0),
            "cpu_s": round(cpu_s, 2),
            "us_per_request": round(per_request, 2),
        }
        print(f"{name}: {len(records):,} requests, {cpu_s:.2f} s of CPU, {per_request:.2f} us a request", flush=True)
        if args.output:
            args.output.mkdir(parents=True, exist_ok=True)
            (args.output / f"{name}.json").write_text(result)
    replayed = all(figures[name]["arrivals"] for name in ENVIRONMENTS)
    per_request = {name: figures[name]["us_per_request"] for name in ENVIRONMENTS}
    print(json.dumps({"smoke": args.smoke, "us_per_request": per_request, "environments": figures, "checks_held": replayed}))
    if not replayed:
        sys.exit(1)


if __name__ == "__main__":
    main()
