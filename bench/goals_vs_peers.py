"""Goal management against what users would deploy instead, on one seeded trace (issue 36).

    .venv/bin/python bench/goals_vs_peers.py [--trace bench/traces/default.json] [--seed 1] [--min-servers 2]
                                             [--max-servers 8] [--plot docs/goals-vs-peers.png] [--side-by-side]
    .venv/bin/python bench/goals_vs_peers.py --smoke    # bench/traces/smoke.json (4 s) seed 4, 1 s intervals
                                                        # after 1 s, the peers side by side

The trace (bench/_trace.py: phases, each with per class a Poisson rate, a service-time distribution, a goal and an
importance) gives the same seeded arrivals to three systems, run one after another on the same cores. Their servers
are real processes sleeping each request's service time:
- wlm: the real service (`wlm serve`, one worker, embedded Redis, SQLite) with its launcher and manager at their
  default settings (named in the JSON), a policy of the trace's classes (goal, importance; each classified by its
  name as userid) and one environment whose servers (`python -m app.examples.echo_server`, one task each) the
  launcher starts to the count the manager decides, within server_limits [--min-servers, --max-servers]. The load
  goes in through one queue manager connection; each request's insert, selection and end are its work record's.
- rq_priority: RQ, one queue per class, SimpleWorkers listening in importance order, a fixed pool of
  round(wlm's server-seconds / the trace's length) workers: the same budget, spent flat.
- keda_rule: the same queues and workers, scaled by KEDA's Redis lists rule (bench/_keda.py): clamp(ceil(queued /
  5), min, max) polled every 10 s (the pollingInterval of deploy/kubernetes/servers/payroll.yaml), scale-down
  stabilised over 60 s (issue 36's figure; the HPA's default is 300 s), min and max = wlm's server limits.
  `--keda-list-lengths 5,2,1` runs the rule again at each further listLength (keda_rule_l2, keda_rule_l1): a
  smaller one scales out sooner and spends more. `equal_attainment` names the cheapest of these runs whose every
  class attains at least what wlm's does, and wlm's server-seconds over its: the comparison at equal attainment.
The peers run on an embedded Redis of their own (appendfsync always, as the service's), after the service stopped:
one after another, or with --side-by-side all at once (each on queues and workers of its own, each disturbing the
others' figures: a smoke run's way, one trace's time for all of them).

Server-seconds are counted the same way for all (bench/_lifetimes.py): the server processes (echo servers under the
service, RQ workers under this process) found in the process table every 0.1 s, each from its kernel start time to
its exit, clipped to the trace's span; the servers' count over time in the plot comes from the same lifetimes.

Attainment (bench/_attainment.py), the same for all from each system's own enqueue, start and end times: per class,
the share of the --interval s intervals after the first --warmup s whose PI, of the requests that ended in the
interval, is at most 1 (an interval with the class's work queued or in flight and none ended is a miss; one with no
work of the class is left out). The PI is the service's own for a window (spark_jobs/manager/goals.py `evaluate`), so a
percentile goal's is the bucketed one. Also each class's worst wait (start - enqueue). The PI of every interval is
printed before the last line. A full run (not --smoke) draws each system's servers and the importance-1 class's PI
over the trace to --plot.

The last line: {"systems": {"wlm"|"rq_priority"|"keda_rule": {"server_seconds": S, "classes": {CLASS: {"importance",
"attainment", "worst_wait_ms"}}}}, "trace", "peers", "wlm", "attainment", "details", "targets"} (issue 36's targets,
judged, not checked). Checked (exit 1 if not so): a bad --trace is refused (exit 2, the field named); every insert
answered 201 and recorded, every RQ job ended, within --drain-seconds; every server-seconds figure above 0 and every
attainment a number from 0 to 1.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # the app, for bench/_records.py (after PYTHONPATH: ab.py's commit)
from _attainment import ClassAttainment, goal_judge, judged_attainment, worst_waits
from _keda import LIST_LENGTH, equal_attainment, keda_label, list_lengths
from _lifetimes import alive_at, server_seconds
from _peers import KedaRule, RqRun, run_rq
from _plot import chart
from _service import machine
from _smoke import conclude, parse_args
from _trace import Trace, TraceError, arrivals, load
from _wlm import MANAGER, WlmRun, run_wlm

from app.policy.schemas import AverageGoal, PercentileGoal
from app.redis.embedded import EmbeddedRedis

HEADLINE = ("systems", "trace", "peers")
TRACES = Path(__file__).resolve().parent / "traces"
# Seed 4's arrivals on the 4 s smoke trace are near its means (8 server-seconds of work; seed 1's hold 14, twice the
# BATCH work: seconds more of backlog for each system to drain).
SMOKE = {"trace": TRACES / "smoke.json", "seed": 4, "warmup": 1.0, "interval": 1.0, "side_by_side": True}
PLOT = Path(__file__).resolve().parent.parent / "docs" / "goals-vs-peers.png"
POLLING_S, DOWN_WINDOW_S = 10.0, 60.0
Run = WlmRun | RqRun


def goal_model(trace: Trace, name: str) -> AverageGoal | PercentileGoal:
    goal = trace.classes[name].goal
    if goal.type == "average":
        return AverageGoal(type="average", response_time_ms=goal.response_time_ms)
    assert goal.percentile is not None
    return PercentileGoal(type="percentile", percentile=goal.percentile, response_time_ms=goal.response_time_ms)


def judge(label: str, trace: Trace, run: Run, warmup: float, interval: float) -> dict[str, ClassAttainment]:
    """Each class's intervals and attainment, every interval's PIs printed."""
    judges = {name: goal_judge(goal_model(trace, name)) for name in trace.classes}
    found = judged_attainment(run.requests, judges, run.start + warmup, run.start + trace.length_s, interval)
    first = next(iter(trace.classes))
    for k, interval_of_first in enumerate(found[first].intervals):
        cells = []
        for name in trace.classes:
            pi = found[name].intervals[k].pi
            text = "-" if pi is None else "miss" if math.isinf(pi) else f"{pi:.2f}"
            cells.append(f"{name} {text:>6} ({found[name].intervals[k].ended:4})")
        print(f"{label:11} {warmup + interval_of_first.offset_s:5g} s  {'  '.join(cells)}", flush=True)
    return found


def summary(trace: Trace, run: Run, found: dict[str, ClassAttainment]) -> dict[str, Any]:
    """A system's figures on the last line."""
    waits = worst_waits(run.requests)
    classes = {
        name: {
            "importance": work.importance,
            "attainment": None if found[name].share is None else round(found[name].share, 3),
            "worst_wait_ms": round(waits[name] * 1000) if math.isfinite(waits.get(name, math.inf)) else None,
        }
        for name, work in trace.classes.items()
    }
    return {"server_seconds": round(server_seconds(run.lifetimes, run.start, run.start + trace.length_s), 1), "classes": classes}


def bad_trace_run(scratch: Path) -> subprocess.Popen[str]:
    """This benchmark run on the smoke trace with a negative rate, in the background (it should be refused at once)."""
    document = json.loads(SMOKE["trace"].read_text())
    document[0]["classes"]["BATCH"]["rate_per_s"] = -1
    (scratch / "bad.json").write_text(json.dumps(document))
    command = [sys.executable, __file__, "--trace", str(scratch / "bad.json")]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def refused(run: subprocess.Popen[str]) -> bool:
    """Whether the bad trace was refused: exit status 2, the field at fault named."""
    _, stderr = run.communicate(timeout=60)
    return run.returncode == 2 and "[0].classes.BATCH.rate_per_s" in stderr


def arguments() -> tuple[argparse.Namespace, Trace]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, default=TRACES / "default.json", help="the trace file (bench/_trace.py)")
    parser.add_argument("--seed", type=int, default=1, help="the arrivals' seed")
    parser.add_argument("--min-servers", type=int, default=2, help="server_limits.min, and keda_rule's minimum")
    parser.add_argument("--max-servers", type=int, default=8, help="server_limits.max, and keda_rule's maximum")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds at the trace's start left out of attainment")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds per attainment interval")
    parser.add_argument("--drain-seconds", type=float, default=180.0, help="how long a system may take to end its backlog")
    parser.add_argument("--plot", type=Path, default=PLOT, help="where a full run draws its chart (PNG)")
    parser.add_argument(
        "--keda-list-lengths",
        type=list_lengths,
        default=(LIST_LENGTH,),
        help=f"keda_rule's listLength, then further ones to run the rule again at (default {LIST_LENGTH})",
    )
    parser.add_argument("--side-by-side", action="store_true", help="run the peers at once rather than one after another")
    args = parse_args(parser, SMOKE)
    try:
        trace = load(args.trace)
    except TraceError as exc:
        parser.error(f"--trace: {exc}")
    if not 1 <= args.min_servers <= args.max_servers or args.interval <= 0 or args.warmup < 0:
        parser.error("need 1 <= --min-servers <= --max-servers, --interval above 0, --warmup 0 or more")
    return args, trace


def main() -> None:
    args, trace = arguments()
    load_, length, low, high = arrivals(trace, args.seed), trace.length_s, args.min_servers, args.max_servers
    scratch = Path(tempfile.mkdtemp(prefix="wlm-bench-peers-"))
    redis_server = EmbeddedRedis(scratch)
    try:
        bad = bad_trace_run(scratch)
        print(f"machine: {machine()}; each system, its servers and this load generator share it", flush=True)
        print(f"trace {args.trace} (seed {args.seed}): {length:g} s, {len(load_)} arrivals", flush=True)
        wlm = run_wlm(trace, load_, low, high, args.drain_seconds)
        print(f"wlm: {wlm.accepted} accepted, manager's decisions (s, desired, connected): {wlm.decisions}", flush=True)
        runs: dict[str, Run] = {"wlm": wlm}
        found = {"wlm": judge("wlm", trace, wlm, args.warmup, args.interval)}
        pool = max(1, round(server_seconds(wlm.lifetimes, wlm.start, wlm.start + length) / length))
        rules = {
            keda_label(length_, k == 0): KedaRule(length_, POLLING_S, DOWN_WINDOW_S, low, high)
            for k, length_ in enumerate(args.keda_list_lengths)
        }
        checks = {"a bad --trace is refused with the field at fault (exit 2)": refused(bad)}
        url = redis_server.start()
        peers: dict[str, int | KedaRule] = {"rq_priority": pool, **rules}

        def peer(label: str) -> RqRun:
            return run_rq(url, label, list(trace.classes), load_, length, peers[label], args.drain_seconds)

        if args.side_by_side:
            with ThreadPoolExecutor(len(peers)) as threads:
                runs |= dict(zip(peers, threads.map(peer, peers), strict=True))
        else:
            runs |= {label: peer(label) for label in peers}
        for label in peers:
            found[label] = judge(label, trace, runs[label], args.warmup, args.interval)
    finally:
        redis_server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    systems = {label: summary(trace, run, found[label]) for label, run in runs.items()}
    servers = {label: [(s, alive_at(run.lifetimes, run.start + s)) for s in range(int(length) + 1)] for label, run in runs.items()}
    details: dict[str, Any] = {label: {"servers_max": max(count for _, count in servers[label])} for label in runs}
    details["wlm"] |= {"accepted": wlm.accepted, "refused": wlm.refused, "unrecorded": wlm.unrecorded, "decisions": wlm.decisions}
    for label in ("rq_priority", *rules):
        run = runs[label]
        assert isinstance(run, RqRun)
        details[label] |= {"jobs": len(run.requests), "unended": run.unended, "polls": run.polls}
    if not args.smoke:
        drawn = ("wlm", "rq_priority", "keda_rule")
        draw(args, trace, {label: found[label][next(iter(trace.classes))] for label in drawn}, {label: servers[label] for label in drawn})
    figures = {
        "systems": systems,
        "trace": {
            "file": str(args.trace),
            "seed": args.seed,
            "length_s": length,
            "arrivals": dict(Counter(a.service_class for a in load_)),
            "phases": trace.summary(),
        },  # fmt: skip
        "peers": {
            "rq_priority": {
                "workers": pool,
                "queues_in_order": list(trace.classes),
                "worker_class": "rq.worker.SimpleWorker",
                "rule": "round(wlm's server_seconds / the trace's length), at least 1",
            },  # fmt: skip
            **{label: rule.as_json() for label, rule in rules.items()},
            "redis": "embedded redis-server, appendfsync always (the service's default)",
        },
        "wlm": {"manager": MANAGER, "server_limits": {"min": low, "max": high}, "service_workers": 1, "server_tasks": 1},
        "side_by_side": args.side_by_side,
        "attainment": {
            "interval_s": args.interval,
            "warmup_s": args.warmup,
            "pi": "spark_jobs.manager.goals.evaluate of the requests ended in it",
        },
        "server_seconds": "server processes' lifetimes (kernel start to exit, polled every 0.1 s) clipped to the trace",
        "details": details,
        "targets": targets(systems),
        "equal_attainment": equal_attainment(systems, list(rules)),
        "machine": machine(),
        "plot": None if args.smoke else str(args.plot),
    }
    drained = {label: details[label]["unended"] == 0 for label in ("rq_priority", *rules)}
    checks |= {
        "every insert answered 201": not wlm.refused,
        f"every accepted request recorded within {args.drain_seconds:g} s": wlm.unrecorded == 0,
        **{f"every {label} job ended within {args.drain_seconds:g} s": ended for label, ended in drained.items()},
        **{f"{label} server_seconds above 0": system["server_seconds"] > 0 for label, system in systems.items()},
        **{
            f"{label} {name} attainment a number from 0 to 1": isinstance(c["attainment"], float | int) and 0 <= c["attainment"] <= 1
            for label, system in systems.items()
            for name, c in system["classes"].items()
        },
    }
    conclude(figures, checks, args.smoke)


def targets(systems: dict[str, Any]) -> dict[str, bool | None]:
    """Issue 36's targets on this run: judged and reported, not checked."""
    wlm, fixed, keda = (systems[label] for label in ("wlm", "rq_priority", "keda_rule"))

    def at_least(other: dict[str, Any], margin: float) -> bool | None:
        pairs = [(wlm["classes"][n]["attainment"], other["classes"][n]["attainment"]) for n in wlm["classes"]]
        if any(a is None or b is None for a, b in pairs):
            return None
        return all(a >= b - margin for a, b in pairs)

    first = next(iter(wlm["classes"].values()))["attainment"]
    return {
        "wlm importance-1 attainment >= 0.95": None if first is None else first >= 0.95,
        "every class >= rq_priority's - 0.02": at_least(fixed, 0.02),
        "every class >= keda_rule's": at_least(keda, 0.0),
        "wlm server_seconds <= 0.7 x keda_rule's": wlm["server_seconds"] <= 0.7 * keda["server_seconds"],
    }


def draw(args: argparse.Namespace, trace: Trace, first: dict[str, ClassAttainment], servers: dict[str, list[tuple[int, int]]]) -> None:
    """The chart: each system's servers, and the importance-1 class's PI per interval (`first`)."""
    pis = {
        label: [(args.warmup + i.offset_s + args.interval / 2, i.pi) for i in found.intervals if i.pi is not None]
        for label, found in first.items()
    }
    starts, at = [], 0.0
    for phase in trace.phases:
        starts.append((phase.name, at))
        at += phase.length_s
    name = next(iter(trace.classes))
    title = f"{args.trace.name}, seed {args.seed}: servers, and {name}'s PI per {args.interval:g} s (importance 1)"
    chart(args.plot, title, trace.length_s, starts, servers, pis, f"{name} PI")
    print(f"plot: {args.plot}", flush=True)


if __name__ == "__main__":
    main()
