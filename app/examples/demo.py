"""`wlm demo`: a few minutes of goal-managed work against a running service, to watch on the dashboard.

It installs the demo policy (the example's service classes; PAYROLL's servers are the echo server, started by the
service's launcher, 1 to 8 of them), connects a queue manager and queues Poisson arrivals of three classes whose
mix changes every phase (a minute by default): a surge of REPORTS, the least important class, then of ONLINE, the
most important, then a steady mix, and again. Each request asks the echo server to work for a while (its payload's
`delay_ms`, drawn around its class's mean), so the manager has to start servers to meet the goals, and to retire
them (0C14) when the surge has passed. Halfway it quiesces PAYROLL (every server ends, work queues up) and resumes
it. One line of progress every few seconds; a summary at the end.

It uses the public REST API only, with an admin key (the one `wlm serve` saved in data/admin.key): the policy, a
principal `wlm-demo` with the queue_manager role and a key for it (revoked at the end), the VARY commands, and the
displays it reports from.

How it counts servers (GET /v1/connections of PAYROLL's servers, those connected since the demo began): `started`
are the distinct processes the launcher named (`instance`); a server that disconnected itself while PAYROLL was
not quiesced was `retired` as surplus (the manager told it 0C14 at its select); those that disconnected between
the QUIESCE and the RESUME were ended by the QUIESCE; any other end (its process exited, it fell silent) is `lost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from app.client import QueueManager, WlmError

ENVIRONMENT = "PAYROLL"
SUBSYSTEM_TYPE = "CB"
SUBSYSTEM_NAME = "DEMO"
PRINCIPAL = "wlm-demo"
DEFAULT_PHASE_SECONDS = 60.0
# Progress lines come this often (at most; shorter phases get more lines per phase).
PROGRESS_SECONDS = 5.0
# How long the demo waits, after its last arrival, for its queued requests to be served before it disconnects
# (which purges what is left).
DRAIN_SECONDS = 60.0
# Waiting for QUIESCED: every server must finish the request it holds (a few seconds) and select once more.
QUIESCED_WITHIN_SECONDS = 60.0
# How long PAYROLL stays quiesced (at most half a phase): long enough for a queue to build up.
QUIESCED_FOR_SECONDS = 10.0
FIRST_SERVER_WITHIN_SECONDS = 60.0
POLL_SECONDS = 0.5

# The example's classes and limits (examples/policy.yaml), with work (WORK_CLASSES) sized to them: ONLINE's 250 ms
# leaves room for its 60 ms of work and a little queueing; a surge of REPORTS (2.8 servers' worth of work) needs
# about half of PAYROLL's eight servers.
DEMO_POLICY: dict[str, Any] = {
    "name": "WLMDEMO",
    "description": "wlm demo: the example's service classes; PAYROLL's echo servers started by the service",
    "service_classes": [
        {
            "name": "ONLINE",
            "description": "interactive requests",
            "importance": 1,
            "goal": {"type": "percentile", "percentile": 90, "response_time_ms": 250},
        },
        {
            "name": "BATCH",
            "description": "long requests, two periods",
            "periods": [
                {"duration_ms": 5000, "importance": 3, "goal": {"type": "average", "response_time_ms": 2000}},
                {"importance": 5, "goal": {"type": "discretionary"}},
            ],
        },
        {"name": "REPORTS", "importance": 4, "goal": {"type": "velocity", "velocity": 40}},
    ],
    "report_classes": ["ATMA", "CASHA", "RPTS"],
    "classification": [
        {
            "subsystem_type": SUBSYSTEM_TYPE,
            "default_service_class": "BATCH",
            "rules": [
                {
                    "qualifier": "UI",
                    "value": "ATM*",
                    "service_class": "ONLINE",
                    "report_class": "ATMA",
                    "rules": [{"qualifier": "TN", "value": "CASH", "report_class": "CASHA"}],
                },
                {"qualifier": "TC", "value": "RPT?", "service_class": "REPORTS", "report_class": "RPTS"},
            ],
        }
    ],
    "application_environments": [
        {
            "name": ENVIRONMENT,
            "subsystem_type": SUBSYSTEM_TYPE,
            "start_command": ["python", "-m", "app.examples.echo_server"],
            "server_limits": {"min": 1, "max": 8, "spread_min": True},
            "completion_time_ms": 30000,
            "backlog_limit": 100000,
        }
    ],
}


@dataclass(frozen=True, slots=True)
class WorkClass:
    service_class: str  # where the demo policy classifies `classification`
    classification: dict[str, str]
    work_ms: float  # the mean time the echo server works on one request (exponentially distributed)


WORK_CLASSES = (
    WorkClass("ONLINE", {"userid": "ATM01", "transaction_name": "CASH"}, 60),
    WorkClass("BATCH", {"userid": "NIGHTLY"}, 400),
    WorkClass("REPORTS", {"transaction_class": "RPT1"}, 700),
)
CLASS_NAMES = tuple(work.service_class for work in WORK_CLASSES)
# A drawn service time is capped, so one unlucky draw does not hold a server for many seconds.
MAX_WORK_FACTOR = 5
# The progress lines' columns; the figures per class are in CLASS_NAMES' order.
PROGRESS_HEADER = (
    f"{'time':>5}  {'phase':<13}  {'arrived':>14}  {'waiting':>12}  {'servers':>7} {'per class':<15}  {'started':>7} {'retired':>7}"
    f"  PI (<= 1: goal met)"
)


@dataclass(frozen=True, slots=True)
class Mix:
    name: str
    label: str  # in the progress lines
    rates: dict[str, float]  # arrivals per second, per service class

    def describe(self) -> str:
        return ", ".join(f"{name} {rate:g}/s" for name, rate in self.rates.items())


REPORTS_SURGE = Mix("a surge of REPORTS, the least important class", "REPORTS surge", {"ONLINE": 4, "BATCH": 0.5, "REPORTS": 4})
ONLINE_SURGE = Mix("a surge of ONLINE, the most important class", "ONLINE surge", {"ONLINE": 16, "BATCH": 0.5, "REPORTS": 0.4})
STEADY = Mix("steady work", "steady", {"ONLINE": 4, "BATCH": 0.5, "REPORTS": 0.4})
MIX_CYCLE = (REPORTS_SURGE, ONLINE_SURGE, STEADY)


@dataclass(frozen=True, slots=True)
class Phase:
    number: int
    start_s: float
    end_s: float
    mix: Mix


def phases(duration_s: float, phase_s: float) -> list[Phase]:
    """The demo's phases: the mixes of MIX_CYCLE in turn, each `phase_s` long (the last cut at `duration_s`)."""
    count = math.ceil(duration_s / phase_s)
    return [Phase(n + 1, n * phase_s, min((n + 1) * phase_s, duration_s), MIX_CYCLE[n % len(MIX_CYCLE)]) for n in range(count)]


class DemoError(Exception):
    """The demo cannot go on (the service refused a setup step, or never reached a state it waits for)."""


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
class Snapshot:
    """The environment as the demo sees it at one moment."""

    state: str
    servers: int
    in_flight: int
    queued: dict[str, int]
    queued_total: int
    pi: dict[str, float | None]
    wanted: dict[str, int]
    connected_per_class: dict[str, int]
    counts: ServerCounts


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

    @property
    def ended(self) -> int:
        """Requests the servers ended: all the demo queued but those purged when it left and those still held."""
        return sum(self.inserted.values()) - self.purged - self.left_in_flight

    def lines(self) -> list[str]:
        inserted, servers, ops = sum(self.inserted.values()), self.servers, self.operator
        refused = f"; {sum(self.refused.values())} refused ({_per_class(self.refused)})" if self.refused else ""
        return [
            f"demo summary after {_clock(self.seconds)}:",
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
            f"  operator: QUIESCE at {_clock(ops.quiesce_s)}, QUIESCED at {_clock(ops.quiesced_s)}, RESUME at {_clock(ops.resume_s)}",
            f"  PI (<= 1: goal met): worst {_pis(self.worst_pi)}; at the end {_pis(self.final_pi)}",
        ]


def _say(line: str) -> None:
    print(line, flush=True)  # at once, also into a file or a pipe: it is progress


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def _per_class(counts: dict[str, int]) -> str:
    return " ".join(f"{name} {count}" for name, count in counts.items()) or "-"


def _pis(pis: dict[str, float] | dict[str, float | None]) -> str:
    return " ".join(f"{name} {'-' if pi is None else f'{pi:.2f}'}" for name, pi in pis.items()) or "-"


class Demo:
    def __init__(self, url: str, admin_key: str, *, minutes: float, phase_seconds: float = DEFAULT_PHASE_SECONDS) -> None:
        if minutes <= 0 or phase_seconds <= 0:
            raise DemoError("--minutes and --phase-seconds must be positive")
        self.url = url
        self.duration_s = minutes * 60
        self.phase_s = phase_seconds
        self.phases = phases(self.duration_s, phase_seconds)
        self.progress_s = min(PROGRESS_SECONDS, phase_seconds / 4)
        self.rng = random.Random()
        self.admin = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=30)
        self.summary = DemoSummary(seconds=0)
        self._began = 0.0
        self._servers_at_start = ServersAtStart(0, frozenset())
        self._key_id: str | None = None
        self._quiesced = False  # QUIESCE issued and not yet resumed: undone if the demo is stopped in between
        self._phase_name = ""  # of the progress lines

    # ---- the run ---------------------------------------------------------------------------------------------

    async def run(self) -> DemoSummary:
        try:
            await self._check_admin()
            await self._install_policy()
            await self._make_available()
            qm_key = await self._queue_manager_key()
            self._servers_at_start = await self._servers_now()
            qm = await QueueManager.connect(self.url, qm_key, SUBSYSTEM_TYPE, SUBSYSTEM_NAME)
            _say(f"queue manager {SUBSYSTEM_TYPE}.{SUBSYSTEM_NAME} connected: the launcher starts {ENVIRONMENT}'s first server")
            try:
                await self._first_server()
                _say(
                    f"{len(self.phases)} phases of {self.phase_s:g} s, QUIESCE and RESUME of {ENVIRONMENT} halfway; figures per class "
                    f"are {'/'.join(CLASS_NAMES)}, servers connected/wanted. Watch it at {self.url}/dashboard"
                )
                self._began = time.monotonic()
                await self._drive(qm)
            finally:
                self.summary.purged = await self._leave(qm)
        finally:
            await self._clean_up()
        return self.summary

    async def _drive(self, qm: QueueManager) -> None:
        """The arrivals, the operator and the progress lines side by side; the first to fail stops the others."""
        try:
            async with asyncio.TaskGroup() as tasks:
                monitor = tasks.create_task(self._monitor())
                driving = [tasks.create_task(self._arrivals(qm, work)) for work in WORK_CLASSES]
                driving.append(tasks.create_task(self._quiesce_and_resume()))
                await asyncio.wait(driving)
                self._phase_name = "draining"
                await self._drain()
                monitor.cancel()
        except* DemoError as failed:
            raise failed.exceptions[0] from None
        snapshot = await self._snapshot()
        self._note(snapshot)
        self.summary.left_in_flight = snapshot.in_flight
        self.summary.final_pi = snapshot.pi
        self.summary.seconds = self._elapsed()

    def _elapsed(self) -> float:
        return time.monotonic() - self._began

    async def _until(self, elapsed_s: float) -> None:
        await asyncio.sleep(max(0.0, elapsed_s - self._elapsed()))

    # ---- setup -----------------------------------------------------------------------------------------------

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self.admin.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise DemoError(f"cannot reach the service at {self.url}: {exc}") from exc
        if response.is_error:
            raise DemoError(f"{method} {path}: HTTP {response.status_code}: {response.text[:500]}")
        return response.json() if response.content else None

    async def _check_admin(self) -> None:
        who = await self._call("GET", "/v1/whoami")
        if "admin" not in who["roles"]:
            raise DemoError(
                f"the key is {who['principal']}'s, whose roles are {who['roles']}: the demo installs a policy and creates a key, which needs an admin key"
            )

    async def _install_policy(self) -> None:
        installed = await self._call("PUT", "/v1/policy", json=DEMO_POLICY)
        verb = "installed" if installed["changed"] else "already active"
        _say(
            f"demo policy {installed['name']} version {installed['version']} {verb}: ONLINE, BATCH and REPORTS; {ENVIRONMENT} 1-8 echo servers"
        )

    async def _make_available(self) -> None:
        """An earlier demo killed while PAYROLL was quiesced (or servers that failed until it STOPPED) left it
        without servers: resume it."""
        state = (await self._call("GET", f"/v1/application-environments/{ENVIRONMENT}"))["state"]
        if state == "QUIESCING":
            await self._wait_for_state({"QUIESCED"}, f"{ENVIRONMENT} was QUIESCING and did not reach QUIESCED")
            state = "QUIESCED"
        if state in ("QUIESCED", "STOPPED"):
            await self._vary("RESUME")
            _say(f"{ENVIRONMENT} was {state}: resumed")

    async def _queue_manager_key(self) -> str:
        """A key of the demo's own queue manager principal, expiring soon after the demo (and revoked at its end)."""
        principal = await self.admin.get(f"/v1/principals/{PRINCIPAL}")
        if principal.status_code == 404:
            await self._call(
                "POST", "/v1/principals", json={"name": PRINCIPAL, "roles": ["queue_manager"], "description": "wlm demo's queue manager"}
            )
        expires = datetime.now(UTC) + timedelta(seconds=self.duration_s + DRAIN_SECONDS + 3600)
        created = await self._call(
            "POST", "/v1/api-keys", json={"principal": PRINCIPAL, "description": "wlm demo", "expires_at": expires.isoformat()}
        )
        self._key_id = created["id"]
        return str(created["key"])

    async def _first_server(self) -> None:
        """Arrivals begin once a server is there, so that the first requests do not all wait for a process start."""
        deadline = time.monotonic() + FIRST_SERVER_WITHIN_SECONDS
        while (await self._call("GET", f"/v1/application-environments/{ENVIRONMENT}"))["servers"] == 0:
            if time.monotonic() > deadline:
                raise DemoError(
                    f"no server of {ENVIRONMENT} connected within {FIRST_SERVER_WITHIN_SECONDS:g} s: is the service's launcher on "
                    f"(WLM_LAUNCHER), and does the start command work (the servers' logs are in the service's data/servers)?"
                )
            await asyncio.sleep(POLL_SECONDS)

    async def _servers_now(self) -> ServersAtStart:
        listed = await self._server_connections()
        return ServersAtStart(max((c["id"] for c in listed), default=0), frozenset(c["id"] for c in listed if c["state"] == "active"))

    async def _server_connections(self, limit: int = 1000) -> list[dict[str, Any]]:
        params = {"role": "server", "application_environment": ENVIRONMENT, "limit": limit}
        items: list[dict[str, Any]] = (await self._call("GET", "/v1/connections", params=params))["items"]
        return items

    # ---- arrivals --------------------------------------------------------------------------------------------

    async def _arrivals(self, qm: QueueManager, work: WorkClass) -> None:
        """Poisson arrivals at the rate of each phase's mix: the time to the next arrival is exponential; at a phase's
        end it is drawn again at the next rate (memorylessness makes the piecewise process exact). Times are kept
        on the demo's schedule, not after each insert, so a slow insert does not slow the arrivals down."""
        at = 0.0
        for phase in self.phases:
            rate = phase.mix.rates[work.service_class]
            at = max(at, phase.start_s)
            while rate > 0:
                at += self.rng.expovariate(rate)
                if at >= phase.end_s:
                    break
                await self._until(at)
                await self._insert(qm, work)

    async def _insert(self, qm: QueueManager, work: WorkClass) -> None:
        work_ms = min(self.rng.expovariate(1 / work.work_ms), MAX_WORK_FACTOR * work.work_ms)
        payload = {"delay_ms": round(work_ms), "demo": work.service_class}
        try:
            inserted = await qm.insert(ENVIRONMENT, payload, classification=work.classification)
        except (WlmError, httpx.HTTPError):
            self.summary.refused[work.service_class] += 1  # a backlog limit, an outage: the demo goes on
            return
        self.summary.inserted[inserted["service_class"]] += 1

    # ---- the operator ----------------------------------------------------------------------------------------

    async def _quiesce_and_resume(self) -> None:
        """Halfway: QUIESCE (every server ends after its request; work keeps queueing), wait for QUIESCED, and RESUME
        QUIESCED_FOR_SECONDS (at most half a phase) after the QUIESCE: the launcher starts servers for the backlog."""
        await self._until(self.duration_s / 2)
        ops = self.summary.operator
        ops.quiesce_s = self._elapsed()
        ops.quiesce_at = datetime.fromisoformat((await self._vary("QUIESCE"))["changed_at"])
        self._quiesced = True
        _say(f"{_clock(ops.quiesce_s)}  VARY WLM,APPLENV={ENVIRONMENT},QUIESCE: its servers end after their current request")
        await self._wait_for_state({"QUIESCED"}, f"{ENVIRONMENT} did not reach QUIESCED", QUIESCED_WITHIN_SECONDS)
        ops.quiesced_s = self._elapsed()
        _say(f"{_clock(ops.quiesced_s)}  {ENVIRONMENT} QUIESCED: no server, work queues up")
        await self._until(max(ops.quiesced_s, ops.quiesce_s + min(QUIESCED_FOR_SECONDS, self.phase_s / 2)))
        ops.resume_s = self._elapsed()
        ops.resume_at = datetime.fromisoformat((await self._vary("RESUME"))["changed_at"])
        self._quiesced = False
        _say(f"{_clock(ops.resume_s)}  VARY WLM,APPLENV={ENVIRONMENT},RESUME: the launcher starts servers again")

    async def _vary(self, action: str) -> dict[str, Any]:
        answer: dict[str, Any] = await self._call(
            "POST", "/v1/operator/commands", json={"command": f"VARY WLM,APPLENV={ENVIRONMENT},{action}"}
        )
        return answer

    async def _wait_for_state(self, states: set[str], failure: str, within_s: float = QUIESCED_WITHIN_SECONDS) -> None:
        deadline = time.monotonic() + within_s
        while (await self._call("GET", f"/v1/application-environments/{ENVIRONMENT}"))["state"] not in states:
            if time.monotonic() > deadline:
                raise DemoError(f"{failure} within {within_s:g} s")
            await asyncio.sleep(POLL_SECONDS)

    # ---- watching --------------------------------------------------------------------------------------------

    async def _monitor(self) -> None:
        """A line every few seconds: elapsed, phase, arrivals, queue, servers connected/wanted per class, PIs."""
        shown_phase = 0
        while True:
            elapsed = self._elapsed()
            phase = next((p for p in self.phases if p.start_s <= elapsed < p.end_s), None)
            if phase is not None and phase.number != shown_phase:
                shown_phase = phase.number
                self._phase_name = phase.mix.label
                _say(f"{_clock(phase.start_s)}  phase {phase.number}/{len(self.phases)}: {phase.mix.name} ({phase.mix.describe()})")
                _say(PROGRESS_HEADER)
            snapshot = await self._snapshot()
            self._note(snapshot)
            _say(self._progress_line(snapshot))
            await asyncio.sleep(self.progress_s)

    async def _snapshot(self) -> Snapshot:
        display, scaling, connections = await asyncio.gather(
            self._call("GET", f"/v1/application-environments/{ENVIRONMENT}"),
            self._call("GET", f"/v1/scaling/application-environments/{ENVIRONMENT}"),
            self._server_connections(),
        )
        wanted: Counter[str] = Counter()
        connected: Counter[str] = Counter()
        for node in scaling["nodes"]:
            wanted.update(node["desired_per_service_class"])
            connected.update(node["connected_per_service_class"])
        return Snapshot(
            state=display["state"],
            servers=display["servers"],
            in_flight=display["in_flight"],
            queued=display["queued"],
            queued_total=display["queued_total"],
            pi={work.service_class: (display["performance"] or {}).get(work.service_class) for work in WORK_CLASSES},
            wanted=dict(wanted),
            connected_per_class=dict(connected),
            counts=count_servers(connections, self._servers_at_start, self.summary.operator),
        )

    def _note(self, snapshot: Snapshot) -> None:
        summary = self.summary
        summary.servers = snapshot.counts
        summary.most_servers = max(summary.most_servers, snapshot.servers)
        summary.most_wanted = max(summary.most_wanted, sum(snapshot.wanted.values()))
        summary.most_queued = max(summary.most_queued, snapshot.queued_total)
        for name, pi in snapshot.pi.items():
            if pi is not None:
                summary.worst_pi[name] = max(pi, summary.worst_pi.get(name, pi))

    def _progress_line(self, s: Snapshot) -> str:
        """Per class, in CLASS_NAMES' order: arrivals so far, requests waiting, servers connected/wanted, PI."""
        arrived = "/".join(str(self.summary.inserted[name]) for name in CLASS_NAMES)
        waiting = "/".join(str(s.queued.get(name, 0)) for name in CLASS_NAMES)
        servers = f"{s.servers}/{sum(s.wanted.values())}"
        per_class = " ".join(f"{s.connected_per_class.get(name, 0)}/{s.wanted.get(name, 0)}" for name in CLASS_NAMES)
        pis = "/".join("-" if s.pi.get(name) is None else f"{s.pi[name]:.2f}" for name in CLASS_NAMES)
        state = "" if s.state == "AVAILABLE" else f"  {s.state}"
        return (
            f"{_clock(self._elapsed()):>5}  {self._phase_name:<13}  {arrived:>14}  {waiting:>12}  {servers:>7} {per_class:<15}  "
            f"{s.counts.started:>7} {s.counts.retired:>7}  {pis}{state}"
        )

    # ---- the end ---------------------------------------------------------------------------------------------

    async def _drain(self) -> None:
        """After the last arrival: until the servers have served what is queued (or DRAIN_SECONDS passed)."""
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline:
            display = await self._call("GET", f"/v1/application-environments/{ENVIRONMENT}")
            if display["queued_total"] == 0 and display["in_flight"] == 0:
                return
            await asyncio.sleep(POLL_SECONDS)
        _say(f"not all served within {DRAIN_SECONDS:g} s of the last arrival: the rest is purged as the queue manager leaves")

    async def _leave(self, qm: QueueManager) -> int:
        """Disconnect the queue manager, which purges what it left queued; how many that were."""
        try:
            answer = await qm.disconnect()
        except (WlmError, httpx.HTTPError) as exc:
            _say(f"the queue manager's disconnect failed ({exc}); its queued work goes when the service notices")
            return 0
        return int(answer["purged"]) if answer else 0

    async def _clean_up(self) -> None:
        """Undo what must not outlive the demo, even when it is interrupted: a QUIESCE without its RESUME, the queue
        manager's key."""
        try:
            if self._quiesced:
                with contextlib.suppress(DemoError):
                    await self._vary("RESUME")
            if self._key_id is not None:
                with contextlib.suppress(DemoError):
                    await self._call("DELETE", f"/v1/api-keys/{self._key_id}")
        finally:
            await self.admin.aclose()


async def run(url: str, admin_key: str, *, minutes: float, phase_seconds: float = DEFAULT_PHASE_SECONDS) -> DemoSummary:
    return await Demo(url, admin_key, minutes=minutes, phase_seconds=phase_seconds).run()
