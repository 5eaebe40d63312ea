"""Where a single-request lifecycle's time goes: py-spy samples the service's processes under the single-request load
of bench/lifecycle.py (`--batch`: its batch phase's load), and Redis counts the commands it ran per single lifecycle.

    .venv/bin/python bench/profile_lifecycle.py [--seconds 15] [--durability strict|fast] [--workers 2] [--resource-groups]
                                                [--batch]
    .venv/bin/python bench/profile_lifecycle.py --smoke     # seconds: 1 s under py-spy, 50 lifecycles, 1 worker

The service (`wlm serve`, --workers uvicorn workers), its Redis, py-spy and the load generator share this machine's cores,
so py-spy's own sampling takes some of the rate; the shares are what to read, not the rate. Printed: the share of
CPU milliseconds per lifecycle of the service, Redis and the load generator (a phase without py-spy), the share of
the service's samples by part (the innermost frame of the stack that is the service's, a library's or the event
loop's: where the CPU is spent), the functions with the most samples of their own, and Redis's commands per
lifecycle (`INFO commandstats` over lifecycles run one after another, less the background duties' own: the scripts
called, and the commands they ran), then, as the
last line, one JSON object of the same. The raw stacks (`py-spy record --format raw`, one line per stack with its
sample count) are kept for a flame graph: `py-spy` can draw one from them, or https://github.com/brendangregg/FlameGraph.

Every run checks that each request the service accepted was ended, that py-spy took samples, and that the rates,
CPU figures and commands per lifecycle are above 0; a failed check makes the exit status 1 (the last line lists it).
`--smoke` is the same run with each phase a second or less, 50 lifecycles counted, and one uvicorn worker (a
second one's start is 2-3 s of CPU, more than the phases take).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import uvloop
from redis.asyncio import Redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http import HttpClient  # noqa: E402
from _lifecycle_phases import (  # noqa: E402
    BATCHED,
    ONLINE,
    POLICY,
    QM,
    SINGLE,
    Load,
    Tally,
    connect_server,
    grouped_policy,
    let_go,
    run_phase,
    select,
    setup,
)
from _service import Service, machine  # noqa: E402
from _smoke import above_zero, conclude, parse_args  # noqa: E402

HEADLINE = (
    "lifecycles_per_s_under_py_spy",
    "cpu_ms_per_lifecycle",
    "redis_commands_per_lifecycle",
    "samples",
    "by_part_pct",
    "top_self_pct",
)
SMOKE = {"seconds": 1.0, "warm_up": 0.25, "lifecycles": 50, "workers": 1}
# The run starts with a phase of this many times --warm-up, unmeasured: the service's caches and connections warm.
FIRST_WARM_UP = 3
# Each sample is charged to the innermost frame on its stack that belongs to one of these (asyncio's and the standard
# library's frames pass it on to their caller); a sample whose innermost frame is the event loop's `run` is in the
# loop's native code (uvloop: polling, socket I/O, callbacks). The first pattern that matches a frame wins.
PARTS = (
    ("redis-py (packing commands, the pool, replies)", r"\((redis|hiredis)/"),
    ("pydantic (validation, serialization)", r"\(pydantic(_core)?/"),
    ("Prometheus client", r"\(prometheus_client/"),
    ("database (SQLAlchemy, aiosqlite)", r"\((sqlalchemy|aiosqlite|sqlite3)/"),
    ("app: queue store and Redis plumbing (app/queues, app/redis)", r"\(app/(queues/|redis/(?!broadcast))"),
    ("app: work services (app/work)", r"\(app/work/"),
    ("app: policy, routing, connections, operator", r"\(app/(policy|routing|connections|operator)/"),
    ("app: auth and deps", r"\(app/(deps\.py|auth/)"),
    ("app: duties, pub/sub, events", r"\(app/(scheduler|redis/broadcast\.py|events)"),
    ("app: HTTP edge (app/web/guards.py, app/web/http_metrics.py)", r"\(app/web/(guards|http_metrics)\.py"),
    ("app: other", r"\(app/"),
    ("Starlette, FastAPI", r"\((starlette|fastapi)/"),
    ("uvicorn, httptools (the HTTP protocol)", r"\((uvicorn|httptools)/"),
)
EVENT_LOOP = "event loop, native (uvloop: polling, socket I/O, callbacks)"


def _part(frames: list[str]) -> str:
    if frames[-1].startswith("Runner.run (asyncio/"):
        return EVENT_LOOP
    for frame in reversed(frames):
        for part, pattern in PARTS:
            if re.search(pattern, frame):
                return part
    return "other (interpreter, standard library)"


def analyse(raw: Path, top: int = 15) -> dict[str, object]:
    """Shares (percent of the service's samples) by part (see PARTS) and by the function a sample was in."""
    stacks: list[tuple[list[str], int]] = []
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    total = sum(count for _, count in stacks) or 1
    by_part: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    for frames, count in stacks:
        by_function[re.sub(r":\d+\)$", ")", frames[-1])] += count
        by_part[_part(frames)] += count

    def share(counter: Counter[str], limit: int | None = None) -> dict[str, float]:
        return {name: round(100 * count / total, 1) for name, count in counter.most_common(limit)}

    return {"samples": total, "by_part_pct": share(by_part), "top_self_pct": share(by_function, top)}


def _calls(stats: dict[str, dict[str, float]]) -> Counter[str]:
    return Counter({name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items() if name.startswith("cmdstat_")})


async def commands_per_lifecycle(
    service: Service, qm: HttpClient, server: HttpClient, qm_token: str, tally: Tally, lifecycles: int
) -> dict[str, float]:
    """Redis's commands per lifecycle, over `lifecycles` run one after another by one producer and one server (insert;
    select that begins it and ends the one before), less what the background duties ran in as long idle."""
    token = await connect_server(server, 1)
    counters = Redis.from_url(service.redis_url)
    held: list[str] = []
    await counters.config_resetstat()
    started = time.monotonic()
    for _ in range(lifecycles):
        status, body = await qm.post(
            "/v1/work", {"connect_token": qm_token, "application_environment": "PAYROLL", "classification": ONLINE, "payload": {"n": 1}}
        )
        assert status == 201, body
        tally.accepted += 1
        ended, held = await select(server, {"connect_token": token, "max_items": 1, "begin": True, "end": [{"token": t} for t in held]})
        assert len(held) == 1, held
        tally.ended += ended
    loaded = _calls(await counters.info("commandstats"))
    elapsed = time.monotonic() - started
    await counters.config_resetstat()
    await asyncio.sleep(elapsed)
    idle = _calls(await counters.info("commandstats"))
    await counters.aclose()
    last = await let_go(server, token, held)
    tally.ended += last
    await server.request("DELETE", f"/v1/connections/{token}")
    per = {name: (loaded[name] - idle[name]) / lifecycles for name in loaded if name not in ("config", "info")}
    shown = {name: round(count, 2) for name, count in sorted(per.items(), key=lambda item: -item[1]) if count >= 0.01}
    return {"all": round(sum(per.values()), 2), **shown}


async def cpu_per_lifecycle(
    service: Service, qm: HttpClient, server: HttpClient, qm_token: str, tally: Tally, phase: Load, seconds: float, warm_up: float
) -> dict[str, float]:
    """CPU milliseconds per lifecycle of the service (its processes but Redis), Redis and this load generator, over
    a phase of `phase`'s load without py-spy."""
    generator_before, started = time.process_time(), time.monotonic()
    rate, cpu_ms = await run_phase(qm, server, qm_token, tally, phase, seconds=seconds, warm_up=warm_up, service=service)
    generator = time.process_time() - generator_before
    assert cpu_ms is not None
    lifecycles = rate * seconds  # the generator's CPU includes run_phase's warm-up and drain: a few percent high
    wall = time.monotonic() - started
    return {
        "lifecycles_per_s": round(rate),
        "service_ms": round(cpu_ms.service, 3),
        "redis_ms": round(cpu_ms.redis, 3),
        "load_generator_ms": round(1000 * generator / lifecycles, 3),
        "cores_busy": round((cpu_ms.service + cpu_ms.redis) * rate / 1000 + generator / wall, 2),
    }


async def load(
    service: Service, args: argparse.Namespace, profile: Path, py_spy: str, tally: Tally
) -> tuple[float, dict[str, float], dict[str, float]]:
    seconds, warm_up = args.seconds, args.warm_up
    phase = BATCHED if args.batch else SINGLE
    qm, server = await setup(service.url, grouped_policy() if args.resource_groups else POLICY)
    status, body = await qm.post("/v1/connections", QM)
    assert status == 201, body
    qm_token = body["token"]
    gc.freeze()
    await run_phase(qm, server, qm_token, tally, phase, seconds=FIRST_WARM_UP * warm_up, warm_up=warm_up)
    cpu = await cpu_per_lifecycle(service, qm, server, qm_token, tally, phase, seconds, warm_up)
    # py-spy samples the whole phase: its own warm-up, the measured seconds and the drain.
    recorder = await asyncio.create_subprocess_exec(
        py_spy,
        "record",
        "--pid",
        str(service.process.pid),
        "--subprocesses",
        "--rate",
        "200",
        "--nonblocking",
        "--format",
        "raw",
        "--output",
        str(profile),
        "--duration",
        str(max(1, round(seconds))),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    rate, _ = await run_phase(qm, server, qm_token, tally, phase, seconds=seconds - warm_up, warm_up=warm_up)
    _, errors = await recorder.communicate()
    if recorder.returncode != 0 or not profile.exists():
        raise RuntimeError(f"py-spy failed ({recorder.returncode}): {errors.decode(errors='replace')[-2000:]}")
    commands = await commands_per_lifecycle(service, qm, server, qm_token, tally, args.lifecycles)
    await qm.close()
    await server.close()
    return rate, commands, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=15.0, help="each measured phase (the one under py-spy: whole seconds)")
    parser.add_argument("--warm-up", type=float, default=1.0, help="each phase's unmeasured start (s)")
    parser.add_argument("--durability", choices=("strict", "fast"), help="WLM_DURABILITY (default: the service's)")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes of the service")
    parser.add_argument("--lifecycles", type=int, default=2000, help="lifecycles, one after another, whose Redis commands are counted")
    parser.add_argument("--resource-groups", action="store_true", help="every class in a resource group of its own (as lifecycle.py)")
    parser.add_argument("--batch", action="store_true", help="the batch phase's load (inserts of 500, selects of 250)")
    parser.add_argument("--output", type=Path, help="where to keep the raw stacks (default: a new scratch directory)")
    args = parse_args(parser, SMOKE)
    if args.seconds <= args.warm_up:
        parser.error("--seconds must be more than --warm-up: py-spy's phase holds both")
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if py_spy is None:
        sys.exit("py-spy is not installed: it is a dev dependency (make install)")
    profile = args.output or Path(tempfile.mkdtemp(prefix="wlm-profile-")) / "single.raw"
    print(f"machine: {machine()}; service ({args.workers} workers), Redis, py-spy and load generator share it", flush=True)
    service = Service(workers=args.workers, **({"durability": args.durability} if args.durability else {}))
    tally = Tally()
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            rate, commands, cpu = runner.run(load(service, args, profile, py_spy, tally))
    finally:
        service.stop()
    figures = {
        "lifecycles_per_s_under_py_spy": round(rate),
        "seconds": args.seconds,
        "durability": args.durability or "default",
        "workers": args.workers,
        "resource_groups": args.resource_groups,
        "load": "batch" if args.batch else "single",
        "cpu_ms_per_lifecycle": cpu,
        "redis_commands_per_lifecycle": commands,
        **analyse(profile),
        "raw_stacks": str(profile),
    }
    for key in ("by_part_pct", "top_self_pct"):
        print(f"{key}:")
        for name, pct in figures[key].items():  # type: ignore[union-attr]
            print(f"  {pct:5.1f}%  {name}")
    print(f"CPU per lifecycle (ms; without py-spy): {cpu}")
    print(f"Redis commands per lifecycle: {commands}")
    checks = {
        f"every accepted request ended ({tally.ended} of {tally.accepted})": tally.ended == tally.accepted,
        "py-spy took samples": bool(figures["by_part_pct"]),
        **above_zero(figures, ["lifecycles_per_s_under_py_spy"]),
        **above_zero(cpu, cpu),
        **above_zero(commands, ["all"]),
    }
    conclude(figures, checks, args.smoke)


if __name__ == "__main__":
    main()
