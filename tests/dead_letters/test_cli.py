"""`wlm dead list|show|retry|discard` against a real `wlm serve`, as an operator at a terminal uses them."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.processes import ServiceProcess

ROOT = Path(__file__).resolve().parent.parent.parent


def _failed_for_good(service: ServiceProcess, payloads: list[dict[str, int]]) -> list[str]:
    """Requests queued, selected and ended failed into the dead letters; their tokens, in order."""
    assert service.wlm("policy", "install", str(ROOT / "examples" / "policy.yaml")).returncode == 0
    qm_key = service.wlm("keys", "create", "--principal", "qm", "--role", "queue_manager").stdout.strip()
    server_key = service.wlm("keys", "create", "--principal", "srv", "--role", "server", "--permit", "CB.*.PAYROLL").stdout.strip()
    tokens = []
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {qm_key}"}) as qm, \
            httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {server_key}"}) as srv:  # fmt: skip
        queue_manager = qm.post(
            "/v1/connections", json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}
        ).json()["token"]
        server_body = {
            "role": "server",
            "subsystem_type": "CB",
            "subsystem_name": "BANK1",
            "application_environment": "PAYROLL",
            "worker_tasks": 1,
        }
        server = srv.post("/v1/connections", json=server_body).json()["token"]
        for payload in payloads:
            body = {
                "connect_token": queue_manager,
                "application_environment": "PAYROLL",
                "classification": {"userid": "ATM01"},
                "payload": payload,
            }
            tokens.append(qm.post("/v1/work", json=body).json()["token"])
            [item] = srv.post("/v1/work/select", json={"connect_token": server}).json()["items"]
            end = {"connect_token": server, "outcome": "failed", "dead_letter": True, "error": f"no stock for {payload['n']}"}
            assert srv.post(f"/v1/work/{item['token']}/end", json=end).status_code == 200
    return tokens


def test_list_show_retry_and_discard(service):
    first, second, third = _failed_for_good(service, [{"n": 1}, {"n": 2}, {"n": 3}])

    listed = service.wlm("dead", "list", "--env", "PAYROLL", "--reason", "failed")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["DIED", "TOKEN", "CLASS", "REASON", "DELIVERIES", "ERROR"]
    assert [line.split()[1] for line in lines[1:]] == [first, second, third]
    assert lines[1].split()[2:] == ["ONLINE", "failed", "1", "no", "stock", "for", "1"]

    shown = service.wlm("dead", "show", second)
    assert shown.returncode == 0 and json.loads(shown.stdout)["payload"] == {"n": 2}

    retried = service.wlm("dead", "retry", "--front", first)
    assert retried.returncode == 0 and retried.stdout == f"{first}: queued again at the front of ONLINE (life 2)\n"
    again = service.wlm("dead", "retry", first)
    assert again.returncode == 1 and "error 404 unknown_dead_letter" in again.stderr

    assert service.wlm("dead", "discard", second).stdout == f"{second}: discarded\n"
    unfiltered = service.wlm("dead", "discard")
    assert unfiltered.returncode == 1 and "give a filter, or all: true" in unfiltered.stderr
    everything = service.wlm("dead", "discard", "--all")
    assert everything.returncode == 0 and everything.stdout == "1 of 1 matching dead letters discarded\n"
    assert service.wlm("dead", "list").stdout == "no dead letters\n"
