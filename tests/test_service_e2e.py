"""The README's first command, as a new user meets it: `wlm serve` on embedded defaults, then the CLI."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from app.queues.keys import AeKeys
from tests.conftest import ADMIN, ADMIN_KEY
from tests.processes import WLM, ServiceProcess, processes_of
from tests.waiting import eventually, eventually_sync
from tests.work.conftest import make_world

ROOT = Path(__file__).resolve().parent.parent
POLL_WAIT_S = 30


@pytest.fixture
def service(tmp_path):
    process = ServiceProcess(tmp_path)
    process.start()
    yield {"url": process.url, "env": process.env, "dir": tmp_path, "process": process.process}
    if process.process.poll() is None:
        process.stop()


def _cli(service, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WLM, *args], cwd=service["dir"], env=service["env"], capture_output=True, text=True, timeout=60)


def test_embedded_defaults_bootstrap_key_and_cli(service):
    data = service["dir"] / "data"
    assert (data / "wlm.db").exists()
    assert any((data / "redis" / name).exists() for name in ("appendonly.aof", "appendonlydir"))  # AOF on
    key = (data / "admin.key").read_text().strip()
    assert key in (service["dir"] / "service.log").read_text()  # printed once at first start

    installed = _cli(service, "policy", "install", str(ROOT / "examples" / "policy.yaml"))
    assert installed.returncode == 0, installed.stderr
    assert "version 1: installed and active" in installed.stdout
    assert "unchanged" in _cli(service, "policy", "install", str(ROOT / "examples" / "policy.yaml")).stdout
    assert "PAYROLL" in _cli(service, "policy", "show").stdout

    bad = service["dir"] / "bad.yaml"
    bad.write_text("name: X\nservice_classes:\n  - {name: A, importance: 6, goal: {type: average, response_time_ms: 5}}\n")
    refused = _cli(service, "policy", "install", str(bad))
    assert refused.returncode == 1 and "service_classes[0].importance" in refused.stderr

    created = _cli(service, "keys", "create", "--principal", "payroll", "--role", "server", "--permit", "CB.*.PAYROLL")
    assert created.returncode == 0, created.stderr
    server_key = created.stdout.strip()
    who = httpx.get(f"{service['url']}/v1/whoami", headers={"Authorization": f"Bearer {server_key}"}).json()
    assert who["principal"] == "payroll" and who["permits"] == ["CB.*.PAYROLL"]
    assert "payroll" in _cli(service, "keys", "list").stdout

    no_key = _cli(service, "policy", "show", "--key", "wlm_wrong")
    assert no_key.returncode == 1 and "invalid_api_key" in no_key.stderr


def test_sigterm_stops_the_embedded_redis_and_every_helper_process(tmp_path):
    process = ServiceProcess(tmp_path, workers="2")  # with a supervisor, whose workers' own children once stayed behind
    process.start()
    port = int((tmp_path / "data" / "redis" / "redis.port").read_text())
    data_dir = str(tmp_path / "data")
    assert processes_of(data_dir)  # the service's own processes (server, workers, records writers) while it runs
    process.process.send_signal(signal.SIGTERM)
    assert process.process.wait(timeout=30) == 0
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    eventually_sync(lambda: processes_of(data_dir) == [], 10, what="no process of the service left (the records writer once was)")


@pytest.mark.asyncio
async def test_sigterm_answers_a_long_poll_and_ends_an_event_stream_at_once(tmp_path):
    """uvicorn waits for open requests before it stops: without the stop notice, this took the poll's 30 s (and
    an open event stream held the process for ever)."""
    service = ServiceProcess(tmp_path, bootstrap_admin_key=ADMIN_KEY)
    service.start()
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=60) as http:
            world = await make_world(http)
            server = await world.server()
            port = int((tmp_path / "data" / "redis" / "redis.port").read_text())
            seen = AeKeys("wlm", "LOCAL", "PAYROLL").seen  # marked by the select script as the poll starts to wait
            async with Redis(port=port, decode_responses=True) as redis:
                await redis.delete(seen)
                poll = asyncio.create_task(world.select(server, expect=None, wait_seconds=POLL_WAIT_S))
                await eventually(lambda: redis.hlen(seen), 10, what="the select waiting in the service")

                async def follow_events() -> list[str]:
                    async with http.stream("GET", "/v1/events", headers=ADMIN) as stream:
                        return [line async for line in stream.aiter_lines()]

                async def stream_blocked_in_its_read() -> bool:  # the only XREAD of the service: the event stream's
                    return any(client["cmd"] == "xread" and "b" in client["flags"] for client in await redis.client_list())

                events = asyncio.create_task(follow_events())
                await eventually(stream_blocked_in_its_read, 10, what="the event stream waiting for advisories")
            assert not poll.done() and not events.done()
            told_at = time.monotonic()
            service.process.send_signal(signal.SIGTERM)
            assert (await asyncio.wait_for(poll, 10)).status_code == 204
            assert ": advisories" in await asyncio.wait_for(events, 10)
            assert await asyncio.to_thread(service.process.wait, 10) == 0
            assert time.monotonic() - told_at < POLL_WAIT_S / 2  # stopped long before the poll's own wait ran out
    finally:
        service.kill()
