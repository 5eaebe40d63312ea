"""The launcher on a real service process: it starts an environment's servers from its start command to the
decided count, they connect and serve, a command that fails to start is not retried for 30 s, a server that dies
is known from its exit, and stopping the service closes its servers' connections."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
import yaml

from app.work import records
from tests.conftest import ADMIN_KEY, EXAMPLE_POLICY
from tests.processes import ServiceProcess
from tests.waiting import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(180)]
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}


# Each check asks the service or reads its files: not too often, on a machine shared with the servers it starts.
POLL_SECONDS = 0.2


async def _until(service: ServiceProcess, check: Callable[[], Awaitable[object]], timeout: float = 60.0) -> None:
    """Polls `check` until it holds; failing, says what the service logged last."""

    def what() -> str:
        return f"the condition; the service's log ends:\n{service.log_path.read_text()[-3000:]}"

    await eventually(check, timeout, what=what, interval=POLL_SECONDS)


async def _service_with(
    tmp_path, start_command: list[str], server_limits: dict[str, int], **settings: str
) -> tuple[ServiceProcess, httpx.AsyncClient, str]:
    settings = {"goal_interval_seconds": "0.5", **settings}
    service = ServiceProcess(
        tmp_path, bootstrap_admin_key=ADMIN_KEY, log_level="info", launcher="true", lease_check_seconds="0.2", **settings
    )
    service.start()
    http = httpx.AsyncClient(base_url=service.url, timeout=10)
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"][0] |= {"start_command": start_command, "server_limits": server_limits}
    assert (
        await http.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=json.dumps(document))
    ).status_code == 200
    await http.post("/v1/principals", headers=ADMIN, json={"name": "qm", "roles": ["queue_manager"]})
    key = (await http.post("/v1/api-keys", headers=ADMIN, json={"principal": "qm"})).json()["key"]
    http.headers["Authorization"] = f"Bearer {key}"
    token = (await http.post("/v1/connections", json=QM)).json()["token"]
    return service, http, token


async def _active_servers(http: httpx.AsyncClient) -> int:
    listed = await http.get("/v1/connections", headers=ADMIN, params={"role": "server", "state": "active"})
    return len(listed.json()["items"])


async def test_the_servers_of_an_environment_are_started_to_its_minimum_and_serve(tmp_path):
    service, http, qm_token = await _service_with(tmp_path, [sys.executable, "-m", "app.examples.echo_server"], {"min": 2, "max": 4})
    try:
        await _until(service, lambda: _count_is(http, 2))
        body = {"connect_token": qm_token, "application_environment": "PAYROLL", "classification": {"userid": "ATM01"}, "payload": {"n": 7}}
        inserted = await http.post("/v1/work", json=body)
        assert inserted.status_code == 201
        logs = sorted((tmp_path / "data" / "servers").glob("PAYROLL-*.log"))
        assert len(logs) == 2  # one log per started server
        # A while in which nothing may happen: a second of launcher passes starts none beyond the decision.
        await asyncio.sleep(1.0)
        assert await _active_servers(http) == 2
    finally:
        await http.aclose()
        service.stop()
    # Stopping the service stops the servers it started.
    pids = [
        int(line.rsplit("pid ", 1)[1].rstrip(")"))
        for line in service.log_path.read_text().splitlines()
        if "started server PAYROLL-" in line
    ]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_an_environment_s_minimum_starts_before_the_manager_s_first_decision(tmp_path):
    # The manager decides once an hour here: the minimum is wanted whatever it decides, so it need not wait for it.
    command = [sys.executable, "-m", "app.examples.echo_server"]
    service, http, _ = await _service_with(tmp_path, command, {"min": 2, "max": 4}, goal_interval_seconds="3600")
    try:
        await _until(service, lambda: _count_is(http, 2))
    finally:
        await http.aclose()
        service.stop()


async def _count_is(http: httpx.AsyncClient, count: int) -> bool:
    return await _active_servers(http) == count


async def test_a_start_command_that_fails_is_not_retried_within_30_seconds(tmp_path):
    failing = [sys.executable, "-c", "import sys; print('cannot reach the ledger', file=sys.stderr); raise SystemExit(3)"]
    service, http, _ = await _service_with(tmp_path, failing, {"min": 1, "max": 2})
    try:
        logs = tmp_path / "data" / "servers"
        await _until(service, lambda: _logs_at_least(logs, 1), 30)
        # Its reason, the end of its log, is in the service's log.
        await _until(service, lambda: _in_log(service, "failed to start (exit 3)"), 30)
        assert "cannot reach the ledger" in service.log_path.read_text().split("failed to start (exit 3)", 1)[1]
        # A while in which nothing may happen: many launcher passes (every 0.2 s) start nothing within the backoff.
        await asyncio.sleep(4.0)
        assert len(list(logs.glob("PAYROLL-*.log"))) == 1
    finally:
        await http.aclose()
        service.stop()


async def test_a_failed_start_is_shown_on_its_environment_and_five_stop_it(tmp_path):
    failing = [sys.executable, "-c", "import sys; print('cannot reach the ledger', file=sys.stderr); raise SystemExit(3)"]
    service, http, _ = await _service_with(tmp_path, failing, {"min": 1, "max": 2}, failed_start_backoff_seconds="0.3")
    try:
        await _until(service, lambda: _state_is(http, "STOPPED"), 60)
        described = (await http.get("/v1/application-environments/PAYROLL", headers=ADMIN)).json()
        error = described["last_start_error"]
        assert error["exit_status"] == 3 and error["node"] == "LOCAL" and "cannot reach the ledger" in error["log_tail"]
        assert (tmp_path / "data" / "servers" / f"{error['instance']}.log").exists()
        assert "5 unexpected server terminations or failed starts" in described["reason"]
        # STOPPED starts nothing more: five starts, five logs.
        # A while in which nothing may happen: many launcher passes (every 0.2 s) start nothing while STOPPED.
        await asyncio.sleep(2.0)
        assert len(list((tmp_path / "data" / "servers").glob("PAYROLL-*.log"))) == 5
    finally:
        await http.aclose()
        service.stop()


async def test_a_start_error_is_forgotten_once_a_start_succeeds(tmp_path):
    missing = ["/nonexistent/payroll-server"]
    service, http, _ = await _service_with(tmp_path, missing, {"min": 1, "max": 1}, failed_start_backoff_seconds="0.5")
    try:
        await _until(service, lambda: _start_error(http), 30)
        error = await _start_error(http)
        assert error["exit_status"] is None and "No such file" in error["log_tail"]
        document = yaml.safe_load(EXAMPLE_POLICY)
        document["application_environments"][0] |= {
            "start_command": ["python", "-m", "app.examples.echo_server"],
            "server_limits": {"min": 1, "max": 1},
        }
        installed = await http.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=json.dumps(document))
        assert installed.status_code == 200
        await _until(service, lambda: _count_is(http, 1), 30)
        # Forgotten once the server outlives the start grace (10 s).
        await _until(service, lambda: _no_start_error(http), 40)
    finally:
        await http.aclose()
        service.stop()


async def _state_is(http: httpx.AsyncClient, state: str) -> bool:
    return (await http.get("/v1/application-environments/PAYROLL", headers=ADMIN)).json()["state"] == state  # type: ignore[no-any-return]


async def _start_error(http: httpx.AsyncClient) -> dict | None:
    return (await http.get("/v1/application-environments/PAYROLL", headers=ADMIN)).json()["last_start_error"]  # type: ignore[no-any-return]


async def _no_start_error(http: httpx.AsyncClient) -> bool:
    return await _start_error(http) is None


async def _in_log(service: ServiceProcess, text: str) -> bool:
    return text in service.log_path.read_text()


async def test_the_example_policy_s_servers_start_and_serve_without_the_virtualenv_on_the_path(tmp_path):
    """The example's `python -m app.examples.echo_server` as a new user runs it: `make run` does not put the
    virtualenv on the PATH, where `python` is another interpreter (or none) without the project's packages."""
    service = ServiceProcess(tmp_path, bootstrap_admin_key=ADMIN_KEY, log_level="info", launcher="true", lease_check_seconds="0.2")
    venv_bin = Path(sys.executable).parent
    service.env["PATH"] = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != venv_bin)
    service.start()
    http = httpx.AsyncClient(base_url=service.url, timeout=10)
    try:
        assert (
            await http.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/yaml"}, content=EXAMPLE_POLICY)
        ).status_code == 200
        await http.post("/v1/principals", headers=ADMIN, json={"name": "qm", "roles": ["queue_manager"]})
        http.headers["Authorization"] = "Bearer " + (await http.post("/v1/api-keys", headers=ADMIN, json={"principal": "qm"})).json()["key"]
        token = (await http.post("/v1/connections", json=QM)).json()["token"]
        body = {"connect_token": token, "application_environment": "PAYROLL", "classification": {"userid": "ATM01"}}
        tokens = set()
        for n in range(30):
            inserted = await http.post("/v1/work", json={**body, "payload": {"n": n}})
            assert inserted.status_code == 201, inserted.text
            tokens.add(inserted.json()["token"])

        async def all_completed() -> bool:
            table = await asyncio.to_thread(records.read, tmp_path / "data" / "records")
            return {row["token"] for row in table.to_pylist() if row["outcome"] == "completed"} >= tokens

        await _until(service, all_completed, 90)
        assert "failed to start" not in service.log_path.read_text() and "cannot start" not in service.log_path.read_text()
    finally:
        await http.aclose()
        service.stop()


async def _logs_at_least(directory, count: int) -> bool:
    return len(list(directory.glob("PAYROLL-*.log"))) >= count if directory.exists() else False


def _launched_pids(service: ServiceProcess) -> list[int]:
    return [
        int(line.rsplit("pid ", 1)[1].rstrip(")"))
        for line in service.log_path.read_text().splitlines()
        if "started server PAYROLL-" in line
    ]


def _server_connections(tmp_path) -> list[tuple[str, str | None, str | None]]:
    with sqlite3.connect(tmp_path / "data" / "wlm.db") as db:
        return db.execute("SELECT state, disconnect_reason, instance FROM connections WHERE role = 'server' ORDER BY id").fetchall()


async def test_a_server_that_dies_is_known_from_its_exit_and_its_work_is_served_again(tmp_path):
    # The heartbeat timeout is long, so only the exit can explain a quick recovery.
    service, http, qm_token = await _service_with(tmp_path, [sys.executable, "-m", "app.examples.echo_server"], {"min": 1, "max": 1})
    try:
        await _until(service, lambda: _count_is(http, 1))
        body = {
            "connect_token": qm_token,
            "application_environment": "PAYROLL",
            "classification": {"userid": "ATM01"},
            "payload": {"delay_ms": 60_000},
        }
        long_one = (await http.post("/v1/work", json=body)).json()["token"]
        await _until(service, lambda: _in_flight_is(http, 1))
        [pid] = _launched_pids(service)
        os.kill(pid, signal.SIGKILL)  # no disconnect, no end
        died_at = time.monotonic()
        await _until(service, lambda: _reason_seen(tmp_path, "exited"), 20)
        assert time.monotonic() - died_at < 15  # WLM_HEARTBEAT_TIMEOUT_SECONDS is 30
        # Given back to its queue and taken by the server started in its place, which is a new process.
        await _until(service, lambda: _count_is(http, 1), 30)
        await _until(service, lambda: _in_flight_is(http, 1), 30)
        assert len(_launched_pids(service)) == 2
        listed = (await http.get("/v1/connections", headers=ADMIN, params={"role": "server"})).json()["items"]
        assert sorted(c["disconnect_reason"] or "" for c in listed) == ["", "exited"]
        assert all(c["instance"] and c["instance"].startswith("PAYROLL-") for c in listed)
        assert long_one  # still queued or held, never lost: the display counts it in flight again
    finally:
        await http.aclose()
        service.stop()
    # The service's stop closed the connection its server could no longer close itself: nothing is left active.
    # ("requested" if its own disconnect got through before the service stopped answering).
    (_, first, _), (state, second, _) = _server_connections(tmp_path)
    assert first == "exited" and state == "disconnected" and second in ("stopped", "requested")


async def _in_flight_is(http: httpx.AsyncClient, count: int) -> bool:
    described = await http.get("/v1/application-environments/PAYROLL", headers=ADMIN)
    return described.json()["in_flight"] == count  # type: ignore[no-any-return]


async def _reason_seen(tmp_path, reason: str) -> bool:
    return any(row[1] == reason for row in _server_connections(tmp_path))
