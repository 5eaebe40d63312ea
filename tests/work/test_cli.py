"""`wlm work show` against a real `wlm serve`, as an operator at a terminal uses it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent.parent


def test_show_a_queued_and_an_ended_request_and_refuse_an_unknown_one(service):
    assert service.wlm("policy", "install", str(ROOT / "examples" / "policy.yaml")).returncode == 0
    qm_key = service.wlm("keys", "create", "--principal", "qm", "--role", "queue_manager").stdout.strip()
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {qm_key}"}) as qm:
        connection = qm.post("/v1/connections", json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"})
        body = {"connect_token": connection.json()["token"], "application_environment": "PAYROLL", "classification": {"userid": "ATM01"}}
        first, second = (qm.post("/v1/work", json=body | {"payload": n}).json()["token"] for n in (1, 2))
        assert qm.delete(f"/v1/work/{first}", params={"connect_token": body["connect_token"]}).status_code == 200

    shown = service.wlm("work", "show", second)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["token", second] and lines[1].split() == ["state", "queued"]
    assert "service class   ONLINE, period 1" in lines and "position        0 ahead of it in its class queue" in lines
    assert "waiting for     no_server" in lines and "expected start  no basis" in lines

    as_json = service.wlm("work", "show", "--json", first)
    assert as_json.returncode == 0, as_json.stderr
    assert (json.loads(as_json.stdout)["state"], json.loads(as_json.stdout)["outcome"]) == ("deleted", "deleted")
    assert service.wlm("work", "show", first).stdout.splitlines()[1:3] == ["state           deleted", "environment     PAYROLL on LOCAL"]

    unknown = service.wlm("work", "show", "LOCAL~PAYROLL~never")
    assert unknown.returncode == 1 and "error 404 unknown_work" in unknown.stderr and unknown.stdout == ""
