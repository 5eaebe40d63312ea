"""The launcher: on this host, starts the server processes of application environments that have a start
command, so that they have as many servers as the manager decided (`{…}:desired`), and at least the minimum of
their server limits before its first decision, as z/OS WLM starts server address spaces from the environment's
procedure.

- Only while the environment's state allows new servers (not QUIESCING, QUIESCED, STOPPED, DELETING).
- Servers connected by hand count: only what the connected servers (or the launched ones not connected yet)
  lack is started. Surplus servers are not killed here: the manager retires them, and they end themselves at
  their next select (0C14) after finishing what they hold.
- A process that exits within START_GRACE_SECONDS with a failure status (not killed by a signal), or that cannot be
  run at all, failed to start: no new start for that environment for WLM_FAILED_START_BACKOFF_SECONDS (z/OS WLM's
  "JCL error" case), so a broken command does not spin. Its reason, the tail of its log, goes to the service log and
  to the environment's `last_start_error` (GET /v1/application-environments/{name}, the dashboard) until a later
  start outlives the grace; and it counts as an unexpected termination, so five failed starts in ten minutes put the
  environment in STOPPED. A server that dies later, or by a signal, is replaced at once; if it died without
  disconnecting, its connection is closed (`exited`), its work given back, and it counts as an unexpected
  termination too, found from its exit, not after the heartbeat timeout. One process counts once however it ended.
- When the service stops, its launched servers are told to stop (SIGTERM) and their connections are closed
  (`stopped`, not a termination): their own disconnect may find the service no longer answering.
- A start command whose program is `python` or `python3` runs on the service's own interpreter, and every process
  gets the service's environment with that interpreter's directory (a virtualenv's `bin`) first on its PATH: the
  example's `python -m app.examples.echo_server` finds the project's packages wherever the service was started
  from.
- Each process gets the connect details in its environment (WLM_URL, WLM_API_KEY, WLM_SUBSYSTEM_TYPE,
  WLM_SUBSYSTEM_NAME, WLM_APPLICATION_ENVIRONMENT, WLM_NODE, and WLM_SERVER_INSTANCE, the name it connects with
  so that its exit can be matched to its connection), writes its output to
  `<data dir>/servers/<AE>-<n>.log`, and dies with the service process (SIGTERM on the parent's death).
- One service process per node launches at a time (a lease in Redis), so replicas do not each start a set.

It is run by the duties' runner, like the scheduler's duties, and like them it acts across domains (the policy, the
operator's states, connections, the servers' decision); unlike them it runs on every host, for its own node.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import secrets
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from app.auth.service import ensure_launcher_key
from app.connections.departures import close_dead_servers
from app.connections.models import Connection
from app.operator.service import count_unexpected_terminations
from app.operator.states import may_start_servers
from app.policy.schemas import ApplicationEnvironment
from app.processes import die_with_parent
from app.servers.service import connected_servers, limits_in_force
from app.state import AppState
from spark_jobs.manager.servers import servers_to_start

log = logging.getLogger(__name__)

START_GRACE_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 10.0
PYTHON_PROGRAMS = ("python", "python3")
# A failed start is explained by the last lines its process wrote (a traceback's end).
FAILED_START_LOG_LINES = 12
# A failed start is shown this long at most when no start has succeeded since (an environment left alone).
START_ERROR_KEEP_SECONDS = 86_400


def launch_command(start_command: Sequence[str], interpreter: str = sys.executable) -> list[str]:
    """The command as run: `python` or `python3` is this service's interpreter, with the project's packages,
    rather than whichever one the PATH finds first."""
    program, *arguments = start_command
    return [interpreter, *arguments] if program in PYTHON_PROGRAMS else list(start_command)


def launch_path(path: str, interpreter: str = sys.executable) -> str:
    """The PATH launched servers get: the interpreter's directory (a virtualenv's `bin`) first, then `path`."""
    first = str(Path(interpreter).parent)
    return os.pathsep.join([first, *(entry for entry in path.split(os.pathsep) if entry and entry != first)])


def log_tail(path: Path, lines: int = FAILED_START_LOG_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(its log cannot be read: {exc})"


def termination_of(instance: str) -> str:
    """How a launched process counts among its environment's unexpected terminations: by its instance, so that a
    failed start whose server had connected, or an exit found twice, counts once."""
    return f"launched:{instance}"


@dataclass
class _Launched:
    process: asyncio.subprocess.Process
    started_at: float
    log_name: str
    node: str
    outlived_grace: bool = False


@dataclass(frozen=True)
class _FailedStart:
    application_environment: str
    node: str
    instance: str
    exit_status: int | None  # None: it could not be run at all
    reason: str | None = None  # for one that could not be run; otherwise the tail of its log


class Launcher:
    def __init__(self, state: AppState, node: str | None, url: str) -> None:
        """`node`: the node this host is (None: the policy's only, or first, node)."""
        self.state, self.configured_node, self.url = state, node, url
        self._owner = secrets.token_hex(8)
        self._launched: dict[str, list[_Launched]] = defaultdict(list)
        self._retry_at: dict[tuple[str, str], float] = {}  # (environment, node) -> no start before
        self._serial = itertools.count(1)
        self._key: str | None = None
        self._exited: list[str] = []  # instances whose process ended since the last pass
        self._failed: list[_FailedStart] = []  # since the last pass
        self._started: set[tuple[str, str]] = set()  # (environment, node) where a start outlived the grace since the last pass

    def running(self, application_environment: str) -> int:
        return len(self._launched[application_environment])

    async def reconcile(self) -> None:
        """Bring each environment with a start command to its desired server count (one pass)."""
        for name in list(self._launched):
            self._reap(name)
        await self._report_starts()
        policy = await self.state.policies.current()
        if self._exited:
            exited, self._exited = self._exited, []
            await self._disconnect_servers(exited, "exited")
        if policy is None:
            return
        node = self.configured_node or policy.nodes[0]
        lease_ms = int(max(3 * self.state.settings.lease_check_seconds, 10) * 1000)
        if not await self.state.leases.hold(f"{self.state.settings.redis_prefix}:launcher:{node}", self._owner, lease_ms):
            return
        for ae in policy.application_environments.values():
            if not ae.start_command or not policy.hosts(ae.name, node):
                continue
            if not may_start_servers(await self.state.operator.state_of(ae.name, policy)):
                continue
            if time.monotonic() < self._retry_at.get((ae.name, node), 0):
                continue
            keys = self.state.queues.keys(node, ae.name)
            desired, _ = await self.state.queues.results.desired_servers(keys)
            limits, _ = await limits_in_force(self.state.queues, policy, ae.name)
            missing = servers_to_start(desired, limits.rule(), await connected_servers(self.state.queues, keys), self.running(ae.name))
            if missing > 0:
                subsystem_name = await self._subsystem_name(ae.subsystem_type)
                if subsystem_name is None:
                    continue  # a server may connect only while a queue manager of its subsystem is connected
                for _ in range(missing):
                    if not await self._start(ae, node, subsystem_name):
                        break

    def _reap(self, name: str) -> None:
        alive = []
        for launched in self._launched[name]:
            code = launched.process.returncode
            young = time.monotonic() - launched.started_at < START_GRACE_SECONDS
            if code is None:
                alive.append(launched)
                if not young and not launched.outlived_grace:
                    launched.outlived_grace = True
                    self._started.add((name, launched.node))
            elif code > 0 and young:  # not killed: it gave up
                self._failed_start(_FailedStart(name, launched.node, launched.log_name, code))
            else:
                log.info("server %s of %s ended (exit %s)", launched.log_name, name, code)
            if code is not None:
                self._exited.append(launched.log_name)
        self._launched[name] = alive

    def _failed_start(self, failed: _FailedStart) -> None:
        self._retry_at[(failed.application_environment, failed.node)] = time.monotonic() + self.state.settings.failed_start_backoff_seconds
        self._failed.append(failed)

    async def _report_starts(self) -> None:
        """Say why each failed start failed (the service log, the environment's `last_start_error`) and count it as
        an unexpected termination; forget the reason where a start has since succeeded."""
        started, self._started = self._started, set()
        for name, node in started:
            await self.state.queues.environments.clear_start_error(self.state.queues.keys(node, name))
        failed, self._failed = self._failed, []
        backoff = self.state.settings.failed_start_backoff_seconds
        for start in failed:
            if start.reason is None:
                reason = await asyncio.to_thread(log_tail, self._log_dir / f"{start.instance}.log")
                log.warning(
                    "server %s of %s failed to start (exit %s); no new start for %.0f s. The end of its log:\n%s",
                    start.instance, start.application_environment, start.exit_status, backoff, reason,
                )  # fmt: skip
            else:
                reason = start.reason
                log.warning("cannot start a server of %s (%s): no new start for %.0f s", start.application_environment, reason, backoff)
            keys = self.state.queues.keys(start.node, start.application_environment)
            error = {
                "at": datetime.fromtimestamp(await self.state.queues.clock_ms() / 1000, UTC).isoformat(),
                "node": start.node,
                "instance": start.instance,
                "exit_status": start.exit_status,
                "log_tail": reason,
            }
            await self.state.queues.environments.note_start_error(keys, error, START_ERROR_KEEP_SECONDS)
            await count_unexpected_terminations(
                self.state.sessions, self.state.queues, self.state.operator, keys, [termination_of(start.instance)]
            )

    @property
    def _log_dir(self) -> Path:
        return self.state.settings.data_dir / "servers"

    async def _disconnect_servers(self, instances: list[str], reason: str) -> None:
        """Close the connections launched processes left open when they ended (they had no chance to disconnect,
        or no service to answer them); an exit counts as an unexpected termination, a stop with the service not."""
        async with self.state.sessions() as session:
            rows = (await session.execute(
                select(Connection.id, Connection.node, Connection.application_environment, Connection.instance)
                .where(Connection.instance.in_(instances), Connection.state == "active", Connection.role == "server")
            )).all()  # fmt: skip
        policy = await self.state.policies.current()
        for server_id, node, application_environment, instance in rows:
            # A server's connection has its node and environment; its instance is one of `instances`.
            assert node is not None and application_environment is not None and instance is not None
            keys = self.state.queues.keys(node, application_environment)
            log.warning(
                "server connection %d of %s was left open by its process: closed (%s), its work given back",
                server_id,
                application_environment,
                reason,
            )
            await close_dead_servers(self.state.sessions, self.state.queues, self.state.connection_cache, policy, keys, [server_id], reason)
            if reason == "exited":
                await count_unexpected_terminations(
                    self.state.sessions, self.state.queues, self.state.operator, keys, [termination_of(instance)]
                )

    async def _subsystem_name(self, subsystem_type: str) -> str | None:
        async with self.state.sessions() as session:
            return await session.scalar(
                select(Connection.subsystem_name)
                .where(Connection.role == "queue_manager", Connection.state == "active", Connection.subsystem_type == subsystem_type)
                .order_by(Connection.id)
                .limit(1)
            )

    async def _start(self, ae: ApplicationEnvironment, node: str, subsystem_name: str) -> bool:
        """Whether the process could be run (whether it serves is known later)."""
        assert ae.start_command
        if self._key is None:
            self._key = await ensure_launcher_key(self.state.sessions, self.state.settings.data_dir)
        directory = self._log_dir
        directory.mkdir(parents=True, exist_ok=True)
        log_name = f"{ae.name}-{os.getpid()}-{next(self._serial)}"
        env = {
            **os.environ,
            "PATH": launch_path(os.environ.get("PATH", "")),
            "WLM_URL": self.url,
            "WLM_API_KEY": self._key,
            "WLM_SUBSYSTEM_TYPE": ae.subsystem_type,
            "WLM_SUBSYSTEM_NAME": subsystem_name,
            "WLM_APPLICATION_ENVIRONMENT": ae.name,
            "WLM_NODE": node,
            "WLM_SERVER_INSTANCE": log_name,
        }
        with (directory / f"{log_name}.log").open("ab") as output:
            try:
                process = await asyncio.create_subprocess_exec(
                    *launch_command(ae.start_command),
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    preexec_fn=die_with_parent,
                )
            except OSError as exc:  # no such program: a failed start
                self._failed_start(_FailedStart(ae.name, node, log_name, None, str(exc)))
                return False
        self._launched[ae.name].append(_Launched(process, time.monotonic(), log_name, node))
        log.info("started server %s of %s (pid %d)", log_name, ae.name, process.pid)
        return True

    async def stop(self) -> None:
        """End every launched server: SIGTERM (they finish what they hold and disconnect), then SIGKILL; then close
        the connections they could not close themselves."""
        launched = [one for group in self._launched.values() for one in group if one.process.returncode is None]
        for one in launched:
            one.process.send_signal(signal.SIGTERM)
        if launched:
            await asyncio.wait([asyncio.create_task(one.process.wait()) for one in launched], timeout=STOP_TIMEOUT_SECONDS)
            for one in launched:
                if one.process.returncode is None:
                    one.process.kill()
                    await one.process.wait()
            await self._disconnect_servers([one.log_name for one in launched], "stopped")
        self._launched.clear()
