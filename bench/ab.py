"""A/B: one benchmark of bench/ on two commits, interleaved, so that the machine's drift from hour to hour (2× here)
falls on both alike.

    .venv/bin/python bench/ab.py lifecycle d1f6743 HEAD --pairs 3 [-- --seconds 10]
    .venv/bin/python bench/ab.py lifecycle HEAD HEAD --pairs 1 -- --smoke     # seconds: the benchmark's smoke run

A and B are each checked out in a git worktree of their own (`a-<commit>`, `b-<commit>` in a scratch directory, so
A and B may be the same commit), removed at the end, also when a run fails. Both run the benchmark
script of the current checkout, so the load is the same and only the service's code differs: the service of a
commit is that worktree's `app` (PYTHONPATH), on this venv when it has each of the commit's runtime dependencies in
a version the commit allows, else on a venv made for it in its worktree (`--own-script` runs each commit's own script
instead). The pairs alternate their order (A B, B A, A B, ...). Arguments after `--` go to the benchmark.

Printed: each numeric figure's median per commit and the ratio B / A (median of the pairs' ratios, and their least
and greatest), then, as the last line, one JSON object of the same (its keys: HEADLINE), with `"smoke": true` when
the benchmark's arguments hold `--smoke`. A run that fails (its own checks among them) fails the A/B; so does a run
whose figures are not those of the others.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _service import ROOT, machine  # noqa: E402
from _smoke import conclude  # noqa: E402

HEADLINE = ("bench", "a", "b", "pairs", "arguments", "figures")
VENV_WLM = Path(sys.executable).parent / "wlm"


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def runtime_dependencies(pyproject: str) -> list[str]:
    return sorted(tomllib.loads(pyproject)["project"]["dependencies"])


def installed_here(requirements: list[str]) -> bool:
    """Whether this venv has each of `requirements` (for this platform) in a version it allows."""
    for text in requirements:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            return False
        if not requirement.specifier.contains(installed, prereleases=True):
            return False
    return True


class Checkout:
    """A commit in its own worktree, with the `wlm` command its service runs as."""

    def __init__(self, commit: str, directory: Path) -> None:
        self.commit, self.dir = commit, directory
        self.wlm = VENV_WLM if installed_here(runtime_dependencies((self.dir / "pyproject.toml").read_text())) else self._own_venv()

    def _own_venv(self) -> Path:
        print(f"{self.commit}: this venv lacks a runtime dependency of it (or its version): making a venv for it", flush=True)
        venv = self.dir / ".venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-e"]
        # The SDK first, from the commit's own tree, as the Makefile installs it: the service depends on wlm-client,
        # which no index has.
        if (self.dir / "sdk" / "python" / "pyproject.toml").exists():
            subprocess.run([*pip, str(self.dir / "sdk" / "python")], check=True)
        subprocess.run([*pip, str(self.dir)], check=True)
        return venv / "bin" / "wlm"

    def run(self, bench: str, arguments: list[str], own_script: bool) -> dict[str, object]:
        script = (self.dir if own_script else ROOT) / "bench" / f"{bench}.py"
        env = os.environ | {"PYTHONPATH": str(self.dir), "WLM_BENCH_WLM": str(self.wlm)}
        done = subprocess.run([sys.executable, str(script), *arguments], cwd=self.dir, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{bench} on {self.commit} failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@contextmanager
def checkout(label: str, commit: str, scratch: Path) -> Iterator[Checkout]:
    """`commit` in the worktree `<label>-<commit>` of `scratch`, removed (and so unregistered) when done, however."""
    commit = git("rev-parse", "--short", commit)
    directory = scratch / f"{label}-{commit}"
    git("worktree", "add", "--detach", str(directory), commit)
    try:
        yield Checkout(commit, directory)
    finally:
        git("worktree", "remove", "--force", str(directory))


def compare(a_runs: list[dict[str, object]], b_runs: list[dict[str, object]]) -> dict[str, dict[str, float]]:
    """Per numeric figure: each commit's median, and B / A over the pairs (median, least, greatest)."""
    figures: dict[str, dict[str, float]] = {}
    for name, value in a_runs[0].items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        a = [float(run[name]) for run in a_runs]  # type: ignore[arg-type]
        b = [float(run[name]) for run in b_runs]  # type: ignore[arg-type]
        ratios = [y / x for x, y in zip(a, b, strict=True) if x]
        figures[name] = {
            "a_median": statistics.median(a),
            "b_median": statistics.median(b),
            **(
                {
                    "ratio_median": round(statistics.median(ratios), 3),
                    "ratio_min": round(min(ratios), 3),
                    "ratio_max": round(max(ratios), 3),
                }
                if ratios
                else {}
            ),
        }
    return figures


def _shown(value: float) -> str:
    """Two decimals, or three significant digits for what is below 1 (CPU milliseconds per lifecycle)."""
    return f"{value:,.2f}" if abs(value) >= 1 else f"{value:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", help="a benchmark of bench/, by name (lifecycle, goals, ...)")
    parser.add_argument("a", help="the commit to compare against (A)")
    parser.add_argument("b", help="the commit compared (B)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--own-script", action="store_true", help="run each commit's own bench/NAME.py")
    args, arguments = parser.parse_known_args()
    arguments = [argument for argument in arguments if argument != "--"]
    print(f"machine: {machine()}; each run's service, Redis and load generator share it", flush=True)
    with tempfile.TemporaryDirectory(prefix="wlm-ab-") as scratch, ExitStack() as worktrees:
        checkouts = [worktrees.enter_context(checkout(label, commit, Path(scratch))) for label, commit in (("a", args.a), ("b", args.b))]
        runs: list[list[dict[str, object]]] = [[], []]
        for pair in range(args.pairs):
            for index in (0, 1) if pair % 2 == 0 else (1, 0):
                run = checkouts[index].run(args.bench, arguments, args.own_script)
                runs[index].append(run)
                print(f"pair {pair + 1} {'ab'[index].upper()} {checkouts[index].commit}: {json.dumps(run)}", flush=True)
    a, b = checkouts[0].commit, checkouts[1].commit
    figures = compare(*runs)
    print(f"\n{'figure':<28} {a:>12} {b:>12}   {b} / {a} (least-greatest)")
    for name, figure in figures.items():
        spread = f"{figure['ratio_median']:.3f} ({figure['ratio_min']:.3f}-{figure['ratio_max']:.3f})" if "ratio_median" in figure else "-"
        print(f"{name:<28} {_shown(figure['a_median']):>12} {_shown(figure['b_median']):>12}   {spread}")
    names = [sorted(run) for run in runs[0] + runs[1]]
    checks = {
        "every run gave the same figures": all(run == names[0] for run in names),
        "figures compared": bool(figures),
    }
    summary = dict(zip(HEADLINE, (args.bench, a, b, args.pairs, arguments, figures), strict=True))
    conclude(summary, checks, "--smoke" in arguments)


if __name__ == "__main__":
    main()
