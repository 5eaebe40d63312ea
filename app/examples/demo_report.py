"""What the demo sees and tells (pure): the environment's servers counted by what became of them, a snapshot of the
environment, its progress lines and the summary it prints at its end.

How it counts servers (GET /v1/connections of PAYROLL's servers, those connected since the demo began): `started`
are the distinct processes the launcher named (`instance`); a server that disconnected itself while PAYROLL was
not quiesced was `retired` as surplus (the manager told it 0C14 at its select); those that disconnected between
the QUIESCE and the RESUME were ended by the QUIESCE; any other end (its process exited, it fell silent) is `lost`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.examples.demo_plan import CLASS_NAMES, WORK_CLASSES

# The progress lines' columns; the figures per class are in CLASS_NAMES' order.
PROGRESS_HEADER = (
    f"{'time':>5}  {'phase':<13}  {'arrived':>14}  {'waiting':>12}  {'servers':>7} {'per class':<15}  {'started':>7} {'retired':>7}"
    f"  PI (<= 1: goal met)"
)


@dataclass(frozen=True, slots=True)
class ServerCounts:
    started: int  # distinct processes the launcher started since the demo began
    retired: int  # ended themselves, told 0C14 as surplus
    quiesced: int  # ended by the QUIESCE
    lost: int  # ended otherwise: their process exited, or they fell silent
    connected: int


@dataclass
class OperatorTimes:
    """Instants of the service's clock (the VARY answers' `changed_at`), and the demo's elapsed seconds of each."""

    quiesce_at: datetime | None = None
    resume_at: datetime | None = None
    quiesce_s: float | None = None
    quiesced_s: float | None = None
    resume_s: float | None = None

    def quiesced_at(self, instant: datetime) -> bool:
        """Whether a server's end at `instant` fell between the QUIESCE and the RESUME."""
        return self.quiesce_at is not None and self.quiesce_at <= instant and (self.resume_at is None or instant < self.resume_at)


@dataclass(frozen=True, slots=True)
class ServersAtStart:
    """The environment's server connections as the demo began: later ones are the demo's; of the earlier ones, those
    still connected then may end during the demo."""

    newest_id: int
    connected: frozenset[int]

    def started_since(self, connection: dict[str, Any]) -> bool:
        return int(connection["id"]) > self.newest_id

    def seen_since(self, connection: dict[str, Any]) -> bool:
        return self.started_since(connection) or connection["id"] in self.connected


def count_servers(connections: Sequence[dict[str, Any]], at_start: ServersAtStart, operator: OperatorTimes) -> ServerCounts:
    """What became of the environment's servers since the demo began (`connections` as GET /v1/connections lists them)."""
    ours = [c for c in connections if at_start.seen_since(c)]
    started = {c["instance"] for c in ours if c["instance"] and at_start.started_since(c)}
    retired = quiesced = lost = 0
    for connection in ours:
        if connection["state"] == "active":
            continue
        if connection["disconnect_reason"] != "requested":
            lost += 1
        elif operator.quiesced_at(datetime.fromisoformat(connection["disconnected_at"])):
            quiesced += 1
        else:
            retired += 1
    connected = sum(1 for c in ours if c["state"] == "active")
    return ServerCounts(len(started), retired, quiesced, lost, connected)


@dataclass(frozen=True, slots=True)
class Moment:
    """A class at one snapshot: the demo's elapsed seconds, its PI, its first period's waiting shares by delay cause
    over the goal window (None: not sampled), as app/examples/demo_delays.py names its misses."""

    at_s: float
    pi: float | None
    delay_pct: dict[str, float] | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The environment as the demo sees it at one moment (`at_s`: the demo's elapsed seconds)."""

    at_s: float
    state: str
    servers: int
    in_flight: int
    queued: dict[str, int]
    queued_total: int
    pi: dict[str, float | None]
    wanted: dict[str, int]
    connected_per_class: dict[str, int]
    counts: ServerCounts
    delay_pct: dict[str, dict[str, float] | None]  # per class, of its first period


@dataclass
class DemoSummary:
    """What the demo did and saw, for the lines it prints at its end."""

    seconds: float
    inserted: Counter[str] = field(default_factory=lambda: Counter(dict.fromkeys(CLASS_NAMES, 0)))  # by the class the service gave
    refused: Counter[str] = field(default_factory=Counter)
    purged: int = 0
    left_in_flight: int = 0
    servers: ServerCounts = ServerCounts(0, 0, 0, 0, 0)
    most_servers: int = 0
    most_wanted: int = 0
    most_queued: int = 0
    worst_pi: dict[str, float] = field(default_factory=dict)
    final_pi: dict[str, float | None] = field(default_factory=dict)
    operator: OperatorTimes = field(default_factory=OperatorTimes)
    attainment: list[str] = field(default_factory=list)  # its lines (app/examples/demo_attainment.py)
    timelines: dict[str, list[Moment]] = field(default_factory=dict)  # per class, at each snapshot
    misses: list[str] = field(default_factory=list)  # their lines (app/examples/demo_delays.py)

    def note(self, snapshot: Snapshot) -> None:
        """Keep what the summary tells of one snapshot: the latest counts, the most at once, the worst PIs."""
        summary = self
        summary.servers = snapshot.counts
        summary.most_servers = max(summary.most_servers, snapshot.servers)
        summary.most_wanted = max(summary.most_wanted, sum(snapshot.wanted.values()))
        summary.most_queued = max(summary.most_queued, snapshot.queued_total)
        for name, pi in snapshot.pi.items():
            if pi is not None:
                summary.worst_pi[name] = max(pi, summary.worst_pi.get(name, pi))
            summary.timelines.setdefault(name, []).append(Moment(snapshot.at_s, pi, snapshot.delay_pct.get(name)))

    @property
    def ended(self) -> int:
        """Requests the servers ended: all the demo queued but those purged when it left and those still held."""
        return sum(self.inserted.values()) - self.purged - self.left_in_flight

    def lines(self) -> list[str]:
        inserted, servers, ops = sum(self.inserted.values()), self.servers, self.operator
        refused = f"; {sum(self.refused.values())} refused ({_per_class(self.refused)})" if self.refused else ""
        return [
            f"demo summary after {clock(self.seconds)}:",
            (
                f"  requests: {inserted} queued ({_per_class(self.inserted)}), {self.ended} ended, "
                f"{self.purged} purged when the demo left, {self.left_in_flight} still in flight{refused}"
            ),
            (
                f"  servers: {servers.started} started by the launcher, {servers.retired} retired as surplus (0C14), "
                f"{servers.quiesced} ended by the QUIESCE, {servers.lost} lost, {servers.connected} connected now; "
                f"at most {self.most_servers} connected and {self.most_wanted} wanted at once"
            ),
            f"  queue: at most {self.most_queued} waiting at once",
            f"  operator: QUIESCE at {clock(ops.quiesce_s)}, QUIESCED at {clock(ops.quiesced_s)}, RESUME at {clock(ops.resume_s)}",
            f"  PI (<= 1: goal met): worst {_pis(self.worst_pi)}; at the end {_pis(self.final_pi)}",
            *self.attainment,
            *self.misses,
        ]


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def _per_class(counts: dict[str, int]) -> str:
    return " ".join(f"{name} {count}" for name, count in counts.items()) or "-"


def _pis(pis: dict[str, float] | dict[str, float | None]) -> str:
    return " ".join(f"{name} {'-' if pi is None else f'{pi:.2f}'}" for name, pi in pis.items()) or "-"


def progress_line(s: Snapshot, summary: DemoSummary, elapsed_s: float, phase_name: str) -> str:
    """Per class, in CLASS_NAMES' order: arrivals so far, requests waiting, servers connected/wanted, PI."""
    arrived = "/".join(str(summary.inserted[name]) for name in CLASS_NAMES)
    waiting = "/".join(str(s.queued.get(name, 0)) for name in CLASS_NAMES)
    servers = f"{s.servers}/{sum(s.wanted.values())}"
    per_class = " ".join(f"{s.connected_per_class.get(name, 0)}/{s.wanted.get(name, 0)}" for name in CLASS_NAMES)
    pis = "/".join("-" if s.pi.get(name) is None else f"{s.pi[name]:.2f}" for name in CLASS_NAMES)
    state = "" if s.state == "AVAILABLE" else f"  {s.state}"
    return (
        f"{clock(elapsed_s):>5}  {phase_name:<13}  {arrived:>14}  {waiting:>12}  {servers:>7} {per_class:<15}  "
        f"{s.counts.started:>7} {s.counts.retired:>7}  {pis}{state}"
    )


def snapshot_of(
    display: dict[str, Any],
    scaling: dict[str, Any],
    connections: Sequence[dict[str, Any]],
    at_start: ServersAtStart,
    operator: OperatorTimes,
    performances: Sequence[dict[str, Any]],
    at_s: float,
) -> Snapshot:
    """The environment from its DISPLAY, its scaling, its server connections and its classes' performance (the REST
    answers), `at_s` into the demo."""
    wanted: Counter[str] = Counter()
    connected: Counter[str] = Counter()
    for node in scaling["nodes"]:
        wanted.update(node["desired_per_service_class"])
        connected.update(node["connected_per_service_class"])
    delay_pct = {
        p["service_class"]: p.get("delay_pct")
        for answer in performances
        for p in answer["periods"]
        if p["application_environment"] == display["name"] and p["period"] == 1
    }
    return Snapshot(
        at_s=at_s,
        state=display["state"],
        servers=display["servers"],
        in_flight=display["in_flight"],
        queued=display["queued"],
        queued_total=display["queued_total"],
        pi={work.service_class: (display["performance"] or {}).get(work.service_class) for work in WORK_CLASSES},
        wanted=dict(wanted),
        connected_per_class=dict(connected),
        counts=count_servers(connections, at_start, operator),
        delay_pct={work.service_class: delay_pct.get(work.service_class) for work in WORK_CLASSES},
    )
