"""bench/ab.py runs a commit on this venv when the venv has what the commit requires."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The benchmarks' helpers are modules of bench/, imported as the benchmarks import them.
sys.path.insert(0, str(ROOT / "bench"))
from ab import installed_here, runtime_dependencies  # noqa: E402


def test_this_checkout_runs_on_its_own_venv() -> None:
    assert installed_here(runtime_dependencies((ROOT / "pyproject.toml").read_text()))


def test_an_older_floor_is_met_and_a_newer_one_or_a_missing_package_is_not() -> None:
    fastapi = metadata.version("fastapi")
    assert installed_here([f"fastapi>=0.1,<={fastapi}"])
    assert not installed_here([f"fastapi>{fastapi}"])
    assert not installed_here(["no-such-distribution>=1"])


def test_a_requirement_for_another_platform_is_not_asked_for() -> None:
    assert installed_here(['no-such-distribution>=1; sys_platform == "no-such-platform"'])


def test_no_benchmark_puts_this_checkout_s_app_before_the_commit_ab_py_names() -> None:
    """ab.py names a commit's tree in PYTHONPATH; a benchmark that put the repository root before it (sys.path.insert)
    would import this checkout's `app` for both commits, and an in-process A/B (group_cost.py) would compare a tree
    with itself (seen: every figure equal)."""
    ahead = [
        f"{script.name}:{number}"
        for script in sorted((ROOT / "bench").glob("*.py"))
        for number, line in enumerate(script.read_text().splitlines(), 1)
        if line.lstrip().startswith("sys.path.insert(") and ("parent.parent" in line or "ROOT)" in line)
    ]
    assert ahead == []
