"""Shared by the benchmarks: `--smoke` (seconds and tiny sizes through the same code paths and the same checks as a
full run, so that a change cannot break a benchmark unnoticed) and the last line, whose failed checks make the exit
status non-zero (tests/bench/test_smoke.py runs every benchmark so)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

# The client compiler only: a smoke run's jobs are seconds on tiny data, where the optimizing compiler's work never
# pays back (whatif's jobs: 40 CPU seconds with it, 25 without, at load 12-20; the same code runs either way).
SMOKE_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1",)


def parse_args(parser: argparse.ArgumentParser, smoke: dict[str, Any]) -> argparse.Namespace:
    """The arguments, `--smoke` among them: it makes `smoke` (option destinations and values) the defaults, so an
    option given on the command line still counts."""
    shown = " ".join(f"--{dest.replace('_', '-')} {value}" for dest, value in smoke.items())
    parser.add_argument("--smoke", action="store_true", help=f"a run of seconds ({shown}): the same code paths and checks")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(**smoke)
    return parser.parse_args()


def conclude(figures: dict[str, Any], checks: dict[str, bool], smoke: bool) -> NoReturn:
    """Print the last line (the figures, the checks that failed, whether this was a smoke run) and exit: 1 if a check
    failed."""
    failed = [name for name, passed in checks.items() if not passed]
    for name in failed:
        print(f"check failed: {name}", file=sys.stderr, flush=True)
    print(json.dumps(figures | {"failed_checks": failed, "smoke": smoke}, default=str), flush=True)
    sys.exit(1 if failed else 0)


def above_zero(figures: dict[str, Any], names: Iterable[str]) -> dict[str, bool]:
    """Checks that each named figure is there and a number above 0: a phase that measured nothing reads 0."""
    return {f"{name} > 0": isinstance(figures.get(name), int | float) and figures[name] > 0 for name in names}
