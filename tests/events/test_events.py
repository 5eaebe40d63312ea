"""GET /v1/events and `wlm events` against a real `wlm serve`: the advisories as a client sees them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx

from app.events.service import KEEPALIVE_SECONDS
from tests.processes import WLM, ServiceProcess

ROOT = Path(__file__).resolve().parent.parent.parent


def headers(service: ServiceProcess) -> dict[str, str]:
    return {"Authorization": f"Bearer {(service.dir / 'data' / 'admin.key').read_text().strip()}"}


def read_events(service: ServiceProcess, count: int, **params: str) -> list[dict]:
    """The first `count` events of a stream (a real HTTP stream over TCP)."""
    events = []
    with httpx.stream("GET", f"{service.url}/v1/events", params=params, headers=headers(service), timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("event: "):
                data = next(lines)
                assert data.startswith("data: ")
                event = json.loads(data[len("data: ") :])
                assert event["subject"] == line[len("event: ") :]
                events.append(event)
                if len(events) == count:
                    return events
    return events


def test_the_stream_replays_and_filters_by_subject(service: ServiceProcess) -> None:
    (active,) = read_events(service, 1, subject="WLM.INFO.SCHEDULER.ACTIVE.>", since="0")
    assert active["data"]["epoch"] == 1
    scheduler = httpx.get(f"{service.url}/v1/scheduler", headers=headers(service)).json()
    assert active["subject"] == f"WLM.INFO.SCHEDULER.ACTIVE.{scheduler['holder']}"


def test_a_state_change_reaches_a_follower_and_the_cli(service: ServiceProcess) -> None:
    env = service.env
    assert service.wlm("policy", "install", str(ROOT / "examples" / "policy.yaml")).returncode == 0
    # From the start of the log, so it does not matter whether the follower connects before or after the change.
    follower = subprocess.Popen(
        [WLM, "events", "--subject", "WLM.INFO.APPLENV.*.PAYROLL", "--since", "0"],
        cwd=service.dir,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        vary = service.wlm("vary", "PAYROLL", "quiesce")
        assert vary.returncode == 0, vary.stderr
        assert follower.stdout is not None
        changes = []
        for _ in range(2):
            _, _, subject, data = follower.stdout.readline().split(" ", 3)
            assert subject == "WLM.INFO.APPLENV.STATE.PAYROLL"
            changes.append(json.loads(data))
        # The operator's VARY, then the manager loop's move on (no server to wait for).
        assert (changes[0]["state"], changes[0]["by"]) == ("QUIESCING", "admin")
        assert (changes[1]["previous_state"], changes[1]["state"], changes[1]["reason"]) == ("QUIESCING", "QUIESCED", "servers drained")
    finally:
        follower.terminate()
        follower.wait(10)


def test_an_idle_stream_stays_open_with_keepalives(service: ServiceProcess) -> None:
    """No advisory for longer than the Redis client's default socket timeout (5 s in redis-py 8): the stream's
    blocking read must not time out and break the stream, but answer with a keepalive comment."""
    with httpx.stream(
        "GET", f"{service.url}/v1/events", params={"subject": "NO.SUCH.SUBJECT"}, headers=headers(service), timeout=KEEPALIVE_SECONDS + 30
    ) as response:
        lines = response.iter_lines()
        assert next(lines) == ": advisories"
        assert [next(lines) for _ in range(2)] == ["", ": keepalive"]
    assert "unhandled error" not in service.log_path.read_text()


def test_a_malformed_subject_is_a_422(service: ServiceProcess) -> None:
    response = httpx.get(f"{service.url}/v1/events", params={"subject": "WLM.>.X"}, headers=headers(service))
    assert response.status_code == 422 and response.json()["error"]["errors"][0]["path"] == "subject"


def test_junk_parameters_get_a_4xx_with_the_error_body(service: ServiceProcess) -> None:
    """The bad-input sweep of tests/test_bad_input.py, for the stream: over real HTTP, each answer's status read and
    the stream closed."""
    junk = ["", "x", "-1", "0", "1e309", "9" * 40, "2026-02-30", "%", "\u00ff" * 300, "a.>.b", "*.", "WLM..X"]
    for name in ("subject", "since", "last"):
        for value in junk:
            with httpx.stream("GET", f"{service.url}/v1/events", params={name: value}, headers=headers(service), timeout=10) as response:
                assert response.status_code < 500, (name, value)
                if response.status_code >= 400:
                    response.read()
                    assert set(response.json()) == {"error"} and response.json()["error"]["code"], (name, value)
    for value in ("x", "1-", "-1", "9" * 40):
        with httpx.stream("GET", f"{service.url}/v1/events", headers={**headers(service), "Last-Event-ID": value}, timeout=10) as response:
            assert response.status_code == 422, value
    assert httpx.get(f"{service.url}/v1/events").status_code == 401
