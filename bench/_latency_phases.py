"""Where an insert→select latency goes, phase by phase: bench/lifecycle.py's `--breakdown` lines up the times the
client saw (the insert sent, each answer received) with those the service's answers carry (WLM_TIMING_HEADER,
app/web/timing.py: wall-clock times of one host, so an insert served by one process and its select by another line
up).

A request's latency is the sum of consecutive phases. A select that waited (its waiter was woken after the insert's
script was sent) goes insert sent → insert handler → insert script sent → waiter woken → select runs again → select
script sent → its reply → answer written → client has it; one that came in after the insert (its server was
between calls) goes from the insert's script straight to the select's script. The insert's own script and answer run
beside these, and are shown apart.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

# Consecutive phases: each is (name, from mark, to mark); "insert." and "select." name the answer a mark is from,
# "sent" and "received" the client's own times.
WOKEN = (
    ("client → insert handler", "sent", "insert.recv"),
    ("insert handler → script sent", "insert.recv", "insert.script_call"),
    ("insert script sent → waiter woken (script, publish, pub/sub)", "insert.script_call", "select.woken"),
    ("woken → waiting select runs", "select.woken", "select.resumed"),
    ("select runs → its script sent", "select.resumed", "select.script_call"),
    ("select script (Redis round trip)", "select.script_call", "select.script_reply"),
    ("select reply → answer written", "select.script_reply", "select.respond"),
    ("answer written → client has it", "select.respond", "received"),
)
CAME_AFTER = (
    *WOKEN[:2],
    ("insert script sent → select script sent (server between calls)", "insert.script_call", "select.script_call"),
    *WOKEN[5:],
)
BESIDE = (
    ("insert script (Redis round trip, fsync in strict)", "insert.script_call", "insert.script_reply"),
    ("insert reply → its answer received", "insert.script_reply", "insert.received"),
)


def parse(header: str | None) -> dict[str, float]:
    """A timing header's marks (the last of each name: a long poll marks each attempt)."""
    marks: dict[str, float] = {}
    for pair in (header or "").split(","):
        name, _, value = pair.partition("=")
        if value:
            marks[name] = float(value)
    return marks


@dataclass
class Breakdown:
    """Each measured request's marks (the client's times and both answers'), keyed by its payload's number: its
    select may be answered before its insert is."""

    inserts: dict[int, dict[str, float]] = field(default_factory=dict)
    selects: dict[int, dict[str, float]] = field(default_factory=dict)

    def inserted(self, number: int, sent: float, received: float, header: str | None) -> None:
        marks = {f"insert.{name}": at for name, at in parse(header).items()}
        self.inserts[number] = {"sent": sent, "insert.received": received, **marks}

    def selected(self, number: int, received: float, header: str | None) -> None:
        self.selects[number] = {f"select.{name}": at for name, at in parse(header).items()} | {"received": received}

    def report(self) -> dict[str, object]:
        """Per phase, in ms: p50 and p99 over the requests that took that path, and the median within the slowest
        1% of all requests (which phase makes the tail); and how many requests waited."""
        requests = [
            self.inserts[n] | marks
            for n, marks in self.selects.items()
            if "select.script_call" in marks and "insert.script_call" in self.inserts.get(n, {})
        ]
        totals = sorted(marks["received"] - marks["sent"] for marks in requests)
        if not totals:
            return {}
        tail_from = _pct(totals, 99)  # as the p99 printed beside it
        woken = [m for m in requests if m.get("select.woken", 0) >= m["insert.script_call"]]
        came_after = [m for m in requests if m.get("select.woken", 0) < m["insert.script_call"]]
        figures: dict[str, object] = {"requests": len(requests), "woken_requests": len(woken), "tail_from_ms": round(tail_from * 1000, 2)}
        for label, group, phases in (("woken", woken, WOKEN), ("came_after", came_after, CAME_AFTER), ("beside", requests, BESIDE)):
            figures[label] = {name: _figures(group, start, end, tail_from) for name, start, end in phases}
        figures["woken_in_inserting_process"] = sum(m.get("insert.pid") == m.get("select.pid") for m in woken)
        figures["processes"] = _processes(requests, tail_from)
        return figures


def _processes(requests: list[dict[str, float]], tail_from: float) -> dict[str, dict[str, int]]:
    """By the service's process (its pid): how many of the requests it inserted and selected, and how many of the
    slowest 1% it selected (how the workers share the load, and the tail)."""
    counts: dict[str, Counter[str]] = {what: Counter() for what in ("inserts", "selects", "slowest_selects")}
    for m in requests:
        counts["inserts"][str(int(m.get("insert.pid", 0)))] += 1
        counts["selects"][str(int(m.get("select.pid", 0)))] += 1
        if m["received"] - m["sent"] >= tail_from:
            counts["slowest_selects"][str(int(m.get("select.pid", 0)))] += 1
    pids = sorted(set(counts["inserts"]) | set(counts["selects"]))
    return {pid: {what: counts[what][pid] for what in counts} for pid in pids}


def _figures(requests: list[dict[str, float]], start: str, end: str, tail_from: float) -> dict[str, float]:
    spans = sorted(1000 * (m[end] - m[start]) for m in requests if start in m and end in m)
    tail = [1000 * (m[end] - m[start]) for m in requests if m["received"] - m["sent"] >= tail_from and start in m and end in m]
    if not spans:
        return {}
    return {
        "p50": round(_pct(spans, 50), 3),
        "p99": round(_pct(spans, 99), 3),
        "tail_median": round(statistics.median(tail), 3) if tail else 0.0,
        "tail_n": len(tail),
    }


def _pct(ordered: list[float], p: float) -> float:
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def show(figures: dict[str, object]) -> None:
    """The breakdown as lines of text."""
    if not figures:
        print("breakdown: no timed request (is WLM_TIMING_HEADER on?)", flush=True)
        return
    print(
        f"breakdown of {figures['requests']} requests ({figures['woken_requests']} woken), the slowest 1% from "
        f"{figures['tail_from_ms']} ms; ms: p50 / p99 / median within the slowest 1% (n)",
        flush=True,
    )
    for label in ("woken", "came_after", "beside"):
        print(f"  {label}:")
        for name, f in figures[label].items():  # type: ignore[attr-defined]
            if f:
                print(f"    {f['p50']:8.3f} {f['p99']:8.3f} {f['tail_median']:8.3f} ({f['tail_n']:3d})  {name}", flush=True)
    shares = "; ".join(
        f"{pid}: {n['inserts']} inserted, {n['selects']} selected ({n['slowest_selects']} of the slowest 1%)"
        for pid, n in figures["processes"].items()  # type: ignore[attr-defined]
    )
    print(f"  by process: {shares}; {figures['woken_in_inserting_process']} woken in the process that inserted", flush=True)
