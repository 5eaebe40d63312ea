"""A/B: one benchmark of bench/ on two commits, interleaved, so that the machine's drift from hour to hour (2× here)
falls on both alike.

    .venv/bin/python bench/ab.py lifecycle d1f6743 HEAD --pairs 3 [-- --seconds 10]

Each commit is checked out in its own git worktree (a scratch directory, removed at the end). Both run the benchmark
script of the current checkout, so the load is the same and only the service's code differs: the service of a
commit is that worktree's `app` (PYTHONPATH), on this venv when the commit's runtime dependencies are the same as
the current checkout's, else on a venv made for it in its worktree (`--own-script` runs each commit's own script
instead). The pairs alternate their order (A B, B A, A B, ...). Arguments after `--` go to the benchmark.

Printed: each numeric figure's median per commit and the ratio B / A (median of the pairs' ratios, and their least
and greatest), then, as the last line, one JSON object of the same.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _service import ROOT, machine  # noqa: E402

VENV_WLM = Path(sys.executable).parent / "wlm"


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def runtime_dependencies(pyproject: str) -> list[str]:
    return sorted(tomllib.loads(pyproject)["project"]["dependencies"])


class Checkout:
    """A commit in its own worktree, with the `wlm` command its service runs as."""

    def __init__(self, commit: str, scratch: Path) -> None:
        self.commit = git("rev-parse", "--short", commit)
        self.dir = scratch / self.commit
        git("worktree", "add", "--detach", str(self.dir), self.commit)
        same = runtime_dependencies((self.dir / "pyproject.toml").read_text()) == runtime_dependencies(
            (ROOT / "pyproject.toml").read_text()
        )
        self.wlm = VENV_WLM if same else self._own_venv()

    def _own_venv(self) -> Path:
        print(f"{self.commit}: its runtime dependencies differ from this checkout's: making a venv for it", flush=True)
        venv = self.dir / ".venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-e", str(self.dir)], check=True)
        return venv / "bin" / "wlm"

    def run(self, bench: str, arguments: list[str], own_script: bool) -> dict[str, object]:
        script = (self.dir if own_script else ROOT) / "bench" / f"{bench}.py"
        env = os.environ | {"PYTHONPATH": str(self.dir), "WLM_BENCH_WLM": str(self.wlm)}
        done = subprocess.run([sys.executable, str(script), *arguments], cwd=self.dir, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{bench} on {self.commit} failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def remove(self) -> None:
        git("worktree", "remove", "--force", str(self.dir))


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
    with tempfile.TemporaryDirectory(prefix="wlm-ab-") as scratch:
        checkouts = [Checkout(args.a, Path(scratch)), Checkout(args.b, Path(scratch))]
        runs: dict[str, list[dict[str, object]]] = {checkout.commit: [] for checkout in checkouts}
        try:
            for pair in range(args.pairs):
                for checkout in checkouts if pair % 2 == 0 else checkouts[::-1]:
                    figures = checkout.run(args.bench, arguments, args.own_script)
                    runs[checkout.commit].append(figures)
                    print(f"pair {pair + 1} {checkout.commit}: {json.dumps(figures)}", flush=True)
        finally:
            for checkout in checkouts:
                checkout.remove()
    a, b = (checkout.commit for checkout in checkouts)
    figures = compare(runs[a], runs[b])
    print(f"\n{'figure':<28} {a:>12} {b:>12}   {b} / {a} (least-greatest)")
    for name, figure in figures.items():
        spread = f"{figure['ratio_median']:.3f} ({figure['ratio_min']:.3f}-{figure['ratio_max']:.3f})" if "ratio_median" in figure else "-"
        print(f"{name:<28} {_shown(figure['a_median']):>12} {_shown(figure['b_median']):>12}   {spread}")
    print(json.dumps({"bench": args.bench, "a": a, "b": b, "pairs": args.pairs, "arguments": arguments, "figures": figures}))


if __name__ == "__main__":
    main()
