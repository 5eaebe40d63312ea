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
