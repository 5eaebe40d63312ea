"""`wlm vary` and `wlm display` against a real `wlm serve`, as an operator at a terminal uses them."""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent


def test_vary_in_both_forms_and_its_refusals(service):
    assert service.wlm("policy", "install", str(ROOT / "examples" / "policy.yaml")).returncode == 0
    quiesced = service.wlm("vary", "VARY WLM,APPLENV=PAYROLL,QUIESCE")
    assert quiesced.returncode == 0, quiesced.stderr
    assert quiesced.stdout == "VARY WLM,APPLENV=PAYROLL,QUIESCE: PAYROLL AVAILABLE -> QUIESCING\n"

    again = service.wlm("vary", "payroll", "quiesce")
    # QUIESCING, or QUIESCED already: the manager loop finds no server to wait for.
    assert again.returncode == 1 and "error 409 wrong_state" in again.stderr and "application environment is QUIESC" in again.stderr

    bad = service.wlm("vary", "V", "WLM,APPLENV=PAYROLL,STOP")  # unquoted: the words are one command again
    assert bad.returncode == 1 and "error 422 validation_failed" in bad.stderr and "column 23, found 'STOP'" in bad.stderr

    unknown = service.wlm("vary", "NOSUCH", "resume")
    assert unknown.returncode == 1 and "unknown_application_environment" in unknown.stderr

    mixed = service.wlm("vary", "--dynamic", "VARY WLM,APPLENV=PAYROLL,RESUME")
    assert mixed.returncode == 1 and "DYNAPPL=" in mixed.stderr


def test_display_prints_a_table(service):
    assert service.wlm("policy", "install", str(ROOT / "examples" / "policy.yaml")).returncode == 0
    qm_key = service.wlm("keys", "create", "--principal", "qm", "--role", "queue_manager").stdout.strip()
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {qm_key}"}) as http:
        connected = http.post("/v1/connections", json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"})
        token = connected.json()["token"]
        for userid in ("ATM01", "ATM02", "BOB"):
            body = {"connect_token": token, "application_environment": "PAYROLL", "classification": {"userid": userid}, "payload": {}}
            assert http.post("/v1/work", json=body).status_code == 201

    shown = service.wlm("display")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "DISPLAY WLM,APPLENV=*"
    assert lines[1].split() == ["NAME", "STATE", "SERVERS", "IN-FLIGHT", "QUEUED", "QUEUED", "BY", "CLASS"]
    [line] = [line for line in lines[2:] if line.startswith("PAYROLL")]
    assert line.split()[2:] == ["0", "0", "3", "ONLINE=2", "BATCH=1"]
    # Fixed width: each value ends where its header does (numbers right-aligned).
    assert line.index("ONLINE=2") == lines[1].index("QUEUED BY CLASS")
    assert line.index(" 3 ") + 2 == lines[1].index("QUEUED ") + len("QUEUED")

    none = service.wlm("display", "X*")
    assert none.returncode == 0 and none.stdout == "DISPLAY WLM,APPLENV=X*: no application environment matches\n"


def test_display_shows_the_resource_groups(service, tmp_path):
    document = yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text())
    document["resource_groups"] = [{"name": "LIMITED", "max_in_flight": 4}]
    document["service_classes"][0]["resource_group"] = "LIMITED"
    grouped = tmp_path / "grouped.yaml"
    grouped.write_text(yaml.safe_dump(document))
    assert service.wlm("policy", "install", str(grouped)).returncode == 0
    try:
        lines = service.wlm("display").stdout.splitlines()
        at = lines.index("")
        assert lines[at + 1].split() == ["RESOURCE", "GROUP", "IN-FLIGHT", "MAX", "MIN", "CAPPED", "CLASSES"]
        assert lines[at + 2].split() == ["LIMITED", "0", "4", "-", "0.0s", "ONLINE"]
    finally:
        assert service.wlm("policy", "install", str(ROOT / "examples" / "policy.yaml")).returncode == 0
