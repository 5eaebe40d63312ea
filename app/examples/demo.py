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
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from wlm_client import QueueManager, WlmError

from app.examples import demo_attainment
from app.examples.demo_delays import miss_lines
from app.examples.demo_plan import (
    CLASS_NAMES,
    DEMO_POLICY,
    ENVIRONMENT,
    MAX_WORK_FACTOR,
    SUBSYSTEM_NAME,
    SUBSYSTEM_TYPE,
    WORK_CLASSES,
    WorkClass,
    phases,
)
from app.examples.demo_report import PROGRESS_HEADER, DemoSummary, ServersAtStart, Snapshot, clock, progress_line, snapshot_of

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


def _say(line: str) -> None:
    print(line, flush=True)  # at once, also into a file or a pipe: it is progress


class DemoError(Exception):
    """The demo cannot go on (the service refused a setup step, or never reached a state it waits for)."""


class Demo:
    def __init__(
        self, url: str, admin_key: str, *, minutes: float, phase_seconds: float = DEFAULT_PHASE_SECONDS, records_dir: Path | None = None
    ) -> None:
        """`records_dir`: where the service writes its work records, for the summary's attainment (None: not told)."""
        if minutes <= 0 or phase_seconds <= 0:
            raise DemoError("--minutes and --phase-seconds must be positive")
        self.url, self.records_dir = url, records_dir
        self.duration_s = minutes * 60
        self.phase_s = phase_seconds
        self.phases = phases(self.duration_s, phase_seconds)
        self.progress_s = min(PROGRESS_SECONDS, phase_seconds / 4)
        self.rng = random.Random()
        self.admin = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=30)
        self.summary = DemoSummary(seconds=0)
        self._began = 0.0
        self._began_epoch = 0.0
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
                self._began, self._began_epoch = time.monotonic(), time.time()
                await self._drive(qm)
            finally:
                self.summary.purged = await self._leave(qm)
            self.summary.attainment = await self._attainment(int(qm.info["id"]))
            self.summary.misses = miss_lines(self.summary.timelines)
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
        self.summary.note(snapshot)
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
                f"the key is {who['principal']}'s, whose roles are {who['roles']}: the "
                "demo installs a policy and creates a key, which needs an admin key"
            )

    async def _install_policy(self) -> None:
        installed = await self._call("PUT", "/v1/policy", json=DEMO_POLICY)
        verb = "installed" if installed["changed"] else "already active"
        _say(
            f"demo policy {installed['name']} version {installed['version']} "
            f"{verb}: ONLINE, BATCH and REPORTS; {ENVIRONMENT} 1-8 echo servers"
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
        _say(f"{clock(ops.quiesce_s)}  VARY WLM,APPLENV={ENVIRONMENT},QUIESCE: its servers end after their current request")
        await self._wait_for_state({"QUIESCED"}, f"{ENVIRONMENT} did not reach QUIESCED", QUIESCED_WITHIN_SECONDS)
        ops.quiesced_s = self._elapsed()
        _say(f"{clock(ops.quiesced_s)}  {ENVIRONMENT} QUIESCED: no server, work queues up")
        await self._until(max(ops.quiesced_s, ops.quiesce_s + min(QUIESCED_FOR_SECONDS, self.phase_s / 2)))
        ops.resume_s = self._elapsed()
        ops.resume_at = datetime.fromisoformat((await self._vary("RESUME"))["changed_at"])
        self._quiesced = False
        _say(f"{clock(ops.resume_s)}  VARY WLM,APPLENV={ENVIRONMENT},RESUME: the launcher starts servers again")

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
                _say(f"{clock(phase.start_s)}  phase {phase.number}/{len(self.phases)}: {phase.mix.name} ({phase.mix.describe()})")
                _say(PROGRESS_HEADER)
            snapshot = await self._snapshot()
            self.summary.note(snapshot)
            _say(progress_line(snapshot, self.summary, self._elapsed(), self._phase_name))
            await asyncio.sleep(self.progress_s)

    async def _snapshot(self) -> Snapshot:
        at_s = self._elapsed()
        display, scaling, connections, *performances = await asyncio.gather(
            self._call("GET", f"/v1/application-environments/{ENVIRONMENT}"),
            self._call("GET", f"/v1/scaling/application-environments/{ENVIRONMENT}"),
            self._server_connections(),
            *(self._call("GET", f"/v1/service-classes/{name}/performance") for name in CLASS_NAMES),
        )
        return snapshot_of(display, scaling, connections, self._servers_at_start, self.summary.operator, performances, at_s)

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

    async def _attainment(self, queue_manager_id: int) -> list[str]:
        """The summary's attainment lines, from the work records of the demo's requests (app/examples/demo_attainment.py)."""
        where = self.records_dir
        found = None if where is None else await demo_attainment.read_requests(where, queue_manager_id, sum(self.summary.inserted.values()))
        if found is None:
            return [f"  attainment: not computed, no work records at {where} (the service runs on another host?)"]
        ops = self.summary.operator
        return demo_attainment.attainment(found, self._began_epoch, self.duration_s, ops.quiesce_at, ops.resume_at).lines()

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


async def run(
    url: str, admin_key: str, *, minutes: float, phase_seconds: float = DEFAULT_PHASE_SECONDS, records_dir: Path | None = None
) -> DemoSummary:
    return await Demo(url, admin_key, minutes=minutes, phase_seconds=phase_seconds, records_dir=records_dir).run()
