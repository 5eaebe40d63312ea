"""IWM4CON / IWM4DIS over HTTP: queue managers and servers connect, heartbeat and disconnect."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import ADMIN, EXAMPLE_POLICY, install_policy, make_key

pytestmark = pytest.mark.asyncio

QM = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}
SERVER = {
    "role": "server",
    "subsystem_type": "CB",
    "subsystem_name": "BANK1",
    "application_environment": "PAYROLL",
    "worker_tasks": 4,
    "worker_weight": 2,
}


@pytest.fixture
async def ready(client):
    """The example policy, a connected queue manager, and keys for a queue manager and a permitted server."""
    await install_policy(client)
    qm = await make_key(client, "qm", ["queue_manager"])
    server = await make_key(client, "srv", ["server"], ["CB.*.PAYROLL"])
    qm_conn = await client.post("/v1/connections", headers=qm, json=QM)
    assert qm_conn.status_code == 201, qm_conn.text
    return {"qm": qm, "server": server, "qm_token": qm_conn.json()["token"]}


async def test_queue_manager_connect(client, ready):
    listed = (await client.get("/v1/connections", headers=ADMIN, params={"role": "queue_manager"})).json()
    assert listed["total"] == 1
    item = listed["items"][0]
    assert item["subsystem_type"] == "CB" and item["subsystem_name"] == "BANK1" and item["node"] == "LOCAL"
    assert item["principal"] == "qm" and item["state"] == "active" and "token" not in item


async def test_server_connect_returns_unguessable_token(client, ready):
    first = await client.post("/v1/connections", headers=ready["server"], json=SERVER)
    second = await client.post("/v1/connections", headers=ready["server"], json=SERVER)
    assert first.status_code == second.status_code == 201
    a, b = first.json(), second.json()
    assert a["token"] != b["token"] and len(a["token"]) >= 40
    assert (a["application_environment"], a["worker_tasks"], a["worker_weight"], a["overflow"]) == ("PAYROLL", 4, 2, False)
    assert a["heartbeat_interval_s"] > 0


async def test_names_are_case_insensitive(client, ready):
    body = {**SERVER, "subsystem_type": "cb", "subsystem_name": "bank1", "application_environment": "payroll"}
    response = await client.post("/v1/connections", headers=ready["server"], json=body)
    assert response.status_code == 201 and response.json()["application_environment"] == "PAYROLL"


@pytest.mark.parametrize(
    ("change", "status", "code", "path"),
    [
        ({"application_environment": "NOPE"}, 404, "unknown_application_environment", None),
        ({"subsystem_type": "IMS"}, 409, "wrong_subsystem_type", None),
        ({"node": "MARS"}, 404, "unknown_node", None),
        ({"worker_tasks": 0}, 422, "validation_failed", "worker_tasks"),
        ({"worker_weight": "heavy"}, 422, "validation_failed", "worker_weight"),
        ({"exit_url": "https://qm.example.com/x"}, 422, "validation_failed", "exit_url"),
        ({"role": "overlord"}, 422, "validation_failed", "role"),
        ({"application_environment": None}, 422, "validation_failed", "application_environment"),
        ({"subsystem_name": "OTHER"}, 409, "queue_manager_not_connected", None),
    ],
    ids=[
        "unknown-ae",
        "wrong-subsystem-type",
        "unknown-node",
        "zero-tasks",
        "wrong-type",
        "exit-url-on-server",
        "bad-role",
        "no-ae",
        "no-qm-for-name",
    ],
)
async def test_server_connect_refusals(client, ready, change, status, code, path):
    response = await client.post("/v1/connections", headers=ready["server"], json={**SERVER, **change})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    if path:
        assert path in [e["path"] for e in error["errors"]], error


async def test_saf_check_names_the_resource(client, ready):
    other = await make_key(client, "srv-other", ["server"], ["CB.*.OTHERAPP", "IMS.**"])
    response = await client.post("/v1/connections", headers=other, json=SERVER)
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "not_permitted",
        "message": "srv-other has no permit for the server resource CB.BANK1.PAYROLL",
        "resource": "CB.BANK1.PAYROLL",
    }


async def test_server_needs_a_connected_queue_manager(client, ready):
    wide = await make_key(client, "srv-wide", ["server"], ["**"])
    response = await client.post("/v1/connections", headers=wide, json={**SERVER, "subsystem_name": "BANK9"})
    assert response.status_code == 409 and response.json()["error"]["code"] == "queue_manager_not_connected"
    await client.delete(f"/v1/connections/{ready['qm_token']}", headers=ready["qm"])
    response = await client.post("/v1/connections", headers=wide, json=SERVER)
    assert response.status_code == 409


async def test_roles_must_match_the_connect_role(client, ready):
    as_qm = await client.post("/v1/connections", headers=ready["qm"], json=SERVER)
    assert as_qm.status_code == 403 and as_qm.json()["error"]["code"] == "missing_role"
    as_viewer = await client.post("/v1/connections", headers=await make_key(client, "v", ["viewer"]), json=QM)
    assert as_viewer.status_code == 403


async def test_node_in_the_resource_when_named(client):
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["nodes"] = [{"name": "EAST"}, {"name": "WEST"}]
    document["application_environments"][0]["nodes"] = ["EAST"]
    await install_policy(client, json.dumps(document), "application/json")
    qm = await make_key(client, "qm-n", ["queue_manager"])
    assert (await client.post("/v1/connections", headers=qm, json=QM)).json()["node"] is None  # several nodes: none implied
    east_only = await make_key(client, "srv-east", ["server"], ["CB.BANK1.PAYROLL.EAST"])
    missing_node = await client.post("/v1/connections", headers=east_only, json=SERVER)
    assert missing_node.status_code == 409 and missing_node.json()["error"]["code"] == "node_required"
    west = await client.post("/v1/connections", headers=east_only, json={**SERVER, "node": "WEST"})
    assert west.status_code == 409 and "does not host" in west.json()["error"]["message"]
    east = await client.post("/v1/connections", headers=east_only, json={**SERVER, "node": "east"})
    assert east.status_code == 201 and east.json()["node"] == "EAST"


async def test_exit_url_must_match_the_allowlist(client, ready):
    allowed = await client.post("/v1/connections", headers=ready["qm"], json={**QM, "exit_url": "https://qm.example.com/wlm-exit"})
    assert allowed.status_code == 201 and allowed.json()["exit_url"] == "https://qm.example.com/wlm-exit"
    for url in ("http://169.254.169.254/latest", "https://qm.example.com.evil.net/x", "http://localhost:6379/"):
        refused = await client.post("/v1/connections", headers=ready["qm"], json={**QM, "exit_url": url})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "exit_url_not_allowed", url
    malformed = await client.post("/v1/connections", headers=ready["qm"], json={**QM, "exit_url": "not a url"})
    assert malformed.status_code == 422


async def test_heartbeat_and_disconnect(client, ready):
    token = (await client.post("/v1/connections", headers=ready["server"], json=SERVER)).json()["token"]
    beat = await client.post(f"/v1/connections/{token}/heartbeat", headers=ready["server"])
    assert beat.status_code == 200 and beat.json()["state"] == "active"
    gone = await client.delete(f"/v1/connections/{token}", headers=ready["server"])
    assert gone.status_code == 200 and gone.json()["state"] == "disconnected" and gone.json()["already_disconnected"] is False
    again = await client.delete(f"/v1/connections/{token}", headers=ready["server"])
    assert again.status_code == 200 and again.json()["already_disconnected"] is True
    late = await client.post(f"/v1/connections/{token}/heartbeat", headers=ready["server"])
    assert late.status_code == 409 and late.json()["error"]["code"] == "connection_closed"
    listed = (await client.get("/v1/connections", headers=ADMIN, params={"state": "disconnected"})).json()["items"]
    assert listed[0]["disconnect_reason"] == "requested"


async def test_tokens_are_private_to_their_principal(client, ready):
    token = (await client.post("/v1/connections", headers=ready["server"], json=SERVER)).json()["token"]
    other = await make_key(client, "srv2", ["server"], ["**"])
    for method, path in (("POST", f"/v1/connections/{token}/heartbeat"), ("DELETE", f"/v1/connections/{token}")):
        response = await client.request(method, path, headers=other)
        assert response.status_code == 404 and response.json()["error"]["code"] == "unknown_connection"
    unknown = await client.post("/v1/connections/c_nothing/heartbeat", headers=ready["server"])
    assert unknown.status_code == 404


async def test_admin_may_force_a_disconnect_and_it_is_audited(client, ready):
    token = (await client.post("/v1/connections", headers=ready["server"], json=SERVER)).json()["token"]
    forced = await client.delete(f"/v1/connections/{token}", headers=ADMIN)
    assert forced.status_code == 200
    events = (await client.get("/v1/audit", headers=ADMIN, params={"action": "connection.force_disconnect"})).json()["items"]
    assert len(events) == 1 and events[0]["actor"] == "admin"


async def test_connect_before_any_policy(client):
    qm = await make_key(client, "early", ["queue_manager"])
    response = await client.post("/v1/connections", headers=qm, json=QM)
    assert response.status_code == 404 and response.json()["error"]["code"] == "no_policy"
