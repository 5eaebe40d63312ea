"""No request yields a 500: every documented operation, fed the junk a new user (or an attacker) sends,
answers a 4xx with the error body, on SQLite and PostgreSQL. Numbers are JSON numbers: neither NaN, Infinity nor
strings."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.conftest import ADMIN, EXAMPLE_POLICY, install_policy, make_key
from tests.work.conftest import make_world

pytestmark = pytest.mark.asyncio

JUNK_BODIES = [
    None,
    [],
    "text",
    12,
    {"name": None},
    {"name": "a\x00b", "description": "nul\x00byte", "roles": ["viewer"], "principal": "p\x00"},
    {"description": "x\x00", "roles": ["viewer"], "permits": ["CB.**"]},
    {"role": "server", "subsystem_type": "CB\x00", "subsystem_name": "Z", "application_environment": "PAYROLL"},
    {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "N\x00"},
    {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "N", "exit_url": "https://qm.example.com/\x00"},
    {"subsystem_type": "CB", "attributes": {"userid": "\x00" * 10}},
    {"name": "x" * 100_000, "roles": ["viewer"] * 1000},
    {"expires_at": "yesterday", "principal": "admin"},
    {"a": {"b": {"c": {"d": [[[[[[[[[[]]]]]]]]]]}}}},
]
RAW_BODIES = [b"\xff\xfe\x00", b'{"unterminated": ', b"[" * 3000]
PATH_VALUES = ["x", "-1", "0", "%00", "%2e%2e", "9" * 40, "c_" + "a" * 500]
QUERY_VALUES = ["", "x", "-1", "0", "1e309", "9" * 40, "2026-02-30", "99999-01-01", "all", "%", "\u00ff" * 300]
# Fills every path parameter for the query sweep: a valid date (report paths) and a harmless name elsewhere, so the
# query string is what gets judged.
PLAIN_PATH_VALUE = "2026-11-21"


def _operations(spec):
    """Every operation but the event streams, which answer valid input with a stream that does not end (the
    in-process transport waits for a body's end): tests/scheduler/test_events.py sweeps them over real HTTP."""
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if "text/event-stream" not in operation.get("responses", {}).get("200", {}).get("content", {}):
                yield method.upper(), path


def _query_parameters(spec, method: str, path: str) -> list[str]:
    return [p["name"] for p in spec["paths"][path][method.lower()].get("parameters", []) if p["in"] == "query"]


def _fill(path: str, value: str) -> str:
    return re.sub(r"\{[^}]+\}", value, path)


def _assert_clean(response, context):
    assert response.status_code < 500, (context, response.status_code, response.text[:500])
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"], (context, body)


# About 28,000 requests: on this 2-core machine 60-115 s depending on the hour, beyond the suite's 120 s hang guard.
@pytest.mark.timeout(600)
async def test_no_operation_answers_500(client):
    await install_policy(client)
    spec = (await client.get("/openapi.json")).json()
    qm = await make_key(client, "fuzz-qm", ["queue_manager"])
    for method, path in _operations(spec):
        for headers in (ADMIN, qm, {}):
            for value in PATH_VALUES:
                target = _fill(path, value)
                for body in JUNK_BODIES:
                    response = await client.request(method, target, headers=headers, json=body)
                    _assert_clean(response, (method, target, body))
                for raw in RAW_BODIES:
                    response = await client.request(method, target, headers={**headers, "Content-Type": "application/json"}, content=raw)
                    _assert_clean(response, (method, target, raw))
                if "{" not in path:
                    break
    # The junk installed nothing and the policy is intact.
    assert (await client.get("/v1/policy", headers=ADMIN)).json()["version"] == 1


async def test_no_query_string_answers_500(client):
    await install_policy(client)
    spec = (await client.get("/openapi.json")).json()
    swept = set()
    for method, path in _operations(spec):
        for name in _query_parameters(spec, method, path):
            swept.add((path, name))
            for value in QUERY_VALUES:
                response = await client.request(method, _fill(path, PLAIN_PATH_VALUE), headers=ADMIN, params={name: value})
                _assert_clean(response, (method, path, name, value))
    # The report API's filters are among them.
    assert {("/v1/reports/workload", name) for name in ("date", "date_from", "date_to", "interval", "limit", "offset", "period")} <= swept
    assert ("/v1/reports/workload/{date}/summary", "interval") in swept


def _paths(response) -> list[str]:
    assert response.status_code == 422, response.text
    return [e["path"] for e in response.json()["error"]["errors"]]


async def test_numbers_json_cannot_carry_are_refused(client):
    """JSON has no NaN or Infinity, and 1e999 is beyond a double: Python's and pydantic's parsers take them all the
    same, as floats that would have been stored and delivered as null."""
    world = await make_world(client)
    server = await world.server()
    await world.insert()
    token = (await world.select(server)).json()["items"][0]["token"]
    for number in ("NaN", "Infinity", "-Infinity", "1e999"):
        item = f'"classification": {{"userid": "ATM01"}}, "payload": {{"x": [1, {number}]}}'
        insert = f'{{"connect_token": "{world.qm_token}", "application_environment": "PAYROLL", {item}}}'
        batch = f'{{"connect_token": "{world.qm_token}", "application_environment": "PAYROLL", "items": [{{{item}}}]}}'
        end = f'{{"connect_token": "{server}", "result": {number}}}'
        select = f'{{"connect_token": "{server}", "end": [{{"token": "{token}", "result": [{number}]}}]}}'
        for path, headers, body, where in (
            ("/v1/work", world.qm, insert, "payload.x[1]"),
            ("/v1/work?via=framework", world.qm, insert, "payload.x[1]"),  # FastAPI's plumbing, not the fast path
            ("/v1/work:batch", world.qm, batch, "items[0].payload.x[1]"),
            (f"/v1/work/{token}/end", world.server_key, end, "result"),
            ("/v1/work/select", world.server_key, select, "end[0].result[0]"),
        ):
            response = await client.post(path, headers={**headers, "content-type": "application/json"}, content=body.encode())
            assert _paths(response) == [where], (path, number)
    assert (await world.end(server, token)).json()["outcome"] == "completed"  # still held: no refused end applied


async def test_a_number_given_as_a_string_or_a_boolean_as_a_number_is_refused(client):
    world = await make_world(client)
    connect = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BANK1", "application_environment": "PAYROLL"}
    assert _paths(await client.post("/v1/connections", headers=world.server_key, json={**connect, "worker_tasks": "2"})) == ["worker_tasks"]
    server = await world.server()
    refused = (("max_items", "5"), ("max_items", 5.5), ("max_items", True), ("wait_seconds", "0"), ("begin", 1), ("begin", "yes"))
    for field, value in refused:
        for suffix in ("", "?via=framework"):
            response = await client.post(f"/v1/work/select{suffix}", headers=world.server_key, json={"connect_token": server, field: value})
            assert _paths(response) == [field], (field, value, suffix)
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["service_classes"][0]["importance"] = "1"
    response = await client.put("/v1/policy", headers={**ADMIN, "content-type": "application/json"}, content=json.dumps(document))
    assert _paths(response) == ["service_classes[0].importance"]


async def test_an_integer_may_be_written_with_a_zero_fraction(client):
    """JSON Schema's "integer", which the OpenAPI document declares, admits 2.0: so does the service, on its fast path
    and FastAPI's alike, and takes it as 2."""
    world = await make_world(client)
    connect = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BANK1", "application_environment": "PAYROLL"}
    body = {**connect, "worker_tasks": 2.0, "worker_weight": 3.0}
    server = await client.post("/v1/connections", headers=world.server_key, json=body)  # sent as 2.0, as json.dumps writes it
    assert server.status_code == 201, server.text
    assert (server.json()["worker_tasks"], server.json()["worker_weight"]) == (2, 3)
    for _ in range(3):
        await world.insert()
    token = server.json()["token"]
    for suffix in ("", "?via=framework"):  # one each of the two worker tasks
        response = await client.post(f"/v1/work/select{suffix}", headers=world.server_key, json={"connect_token": token, "max_items": 1.0})
        assert response.status_code == 200 and len(response.json()["items"]) == 1, (suffix, response.text)
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["service_classes"][0]["importance"] = 1.0
    response = await client.put("/v1/policy", headers={**ADMIN, "content-type": "application/json"}, content=json.dumps(document))
    assert response.status_code in (200, 201), response.text
    assert (await client.get("/v1/policy", headers=ADMIN)).json()["definition"]["service_classes"][0]["importance"] == 1
