"""Every benchmark of bench/ in its smoke mode: tiny sizes through the same code paths and the same checks, so that a
change cannot break a benchmark unnoticed. Each must end with one JSON object carrying the headline figures its module
declares (`HEADLINE`) and `"smoke": true`, and leave no process, and so no listening port, behind.

A benchmark's processes are found by a marker in their environment (every child inherits it), not by their parent:
a server that daemonizes or is reparented is found all the same."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.waiting import eventually_sync

BENCH = Path(__file__).resolve().parents[2] / "bench"
MARKER = "BENCH_SMOKE_RUN"  # not WLM_: the benchmarks pass on their environment less the service's own settings
# A smoke run is seconds of work; the JVM's start (bench/report.py) and a cold machine make some of them slower.
SMOKE_TIMEOUT_S = 280
# How each benchmark is called in smoke mode (those not listed: `--smoke` alone).
ARGUMENTS = {"ab": ["lifecycle", "HEAD", "HEAD", "--pairs", "1", "--", "--smoke"]}
# Options whose code a plain smoke run does not reach, each a smoke run of its own: the benchmark, its arguments and
# the figures they add to its headline.
VARIANTS = {
    "lifecycle --resource-groups": (
        "lifecycle",
        ["--smoke", "--resource-groups", "--rounds", "2"],
        ("groups_vs_none_single", "groups_vs_none_cpu_single", "groups_vs_none_batch", "groups_insert_to_select_p99_ms"),
    ),
}


def benchmarks() -> list[str]:
    """Every benchmark: bench/NAME.py; bench/_*.py are their helpers."""
    return sorted(path.stem for path in BENCH.glob("*.py") if not path.name.startswith("_"))


def headline(name: str) -> tuple[str, ...]:
    """The module's `HEADLINE`: a tuple of string literals at its top level (read, not imported: importing a
    benchmark sets up what it needs)."""
    tree = ast.parse((BENCH / f"{name}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HEADLINE" for t in node.targets):
            names = ast.literal_eval(node.value)
            assert isinstance(names, tuple) and names and all(isinstance(n, str) for n in names), names
            return names
    raise AssertionError(f"bench/{name}.py declares no HEADLINE = (...) of its headline figures' names")


def marked_processes(run_id: str) -> dict[int, str]:
    """The processes (pid: command line) whose environment carries this run's marker."""
    wanted = f"{MARKER}={run_id}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or a kernel thread
            continue
    return found


def listening_ports(pids: dict[int, str]) -> set[int]:
    """The TCP ports those processes listen on."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_every_benchmark_declares_its_headline() -> None:
    names = benchmarks()
    assert {"ab", "lifecycle", "report", "goals"} <= set(names)
    for name in names:
        assert headline(name)


def smoke_runs() -> list[object]:
    """Each benchmark's smoke run, then the variants'."""
    plain = [pytest.param(name, ARGUMENTS.get(name, ["--smoke"]), (), id=name) for name in benchmarks()]
    return plain + [pytest.param(*variant, id=label) for label, variant in VARIANTS.items()]


@pytest.mark.timeout(SMOKE_TIMEOUT_S + 30)
@pytest.mark.parametrize(("name", "arguments", "added"), smoke_runs())
def test_smoke(name: str, arguments: list[str], added: tuple[str, ...], tmp_path: Path) -> None:
    run_id = uuid.uuid4().hex
    # Its own temporary directory, to see what the run leaves there.
    env = os.environ | {MARKER: run_id, "TMPDIR": str(tmp_path)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *arguments],
        cwd=BENCH.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
    )
    print(f"bench/{name}.py smoke: {time.monotonic() - started:.1f} s")
    said = f"exit {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    assert done.returncode == 0, said
    last = done.stdout.strip().splitlines()[-1]
    figures = json.loads(last)
    assert isinstance(figures, dict), last
    assert figures.get("smoke") is True, last
    missing = [key for key in (*headline(name), *added) if key not in figures]
    assert not missing, f"headline figures missing from the last line: {missing}\n{last}"
    # A service's scratch directory (its Redis's AOF, its records: hundreds of MB after a full run) goes with the run.
    assert not list(tmp_path.glob("wlm-bench-*")), f"left in the temporary directory: {sorted(p.name for p in tmp_path.iterdir())}"
    # A process that got SIGTERM as the benchmark stopped may still be on its way out.
    try:
        eventually_sync(lambda: not marked_processes(run_id), 10, what="every process of the run gone")
    except AssertionError:
        left = marked_processes(run_id)
        raise AssertionError(f"left behind: {left}; listening on {sorted(listening_ports(left))}") from None
