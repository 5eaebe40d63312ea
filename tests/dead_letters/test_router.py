"""Dead letters through the API, on the real app, Redis and database: a request abandoned after its last delivery
or failed for good is kept with its payload, listed, looked at, retried once however many ask at once, and
discarded; every retry and discard is audited, and the retried request's record is its second life."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.work import records
from tests.conftest import ADMIN
from tests.waiting import eventually
from tests.work.conftest import BATCH, World, make_world, policy_document

pytestmark = pytest.mark.asyncio


async def _failed_for_good(world: World, server: str, payload: object, error: str = "bad input", **insert: object) -> str:
    """A request selected by `server` and ended failed into the dead letters; its token."""
    token = (await world.insert(payload, **insert))["token"]
    items = (await world.select(server, max_items=10)).json()["items"]
    assert [i["token"] for i in items] == [token]
    await world.end(server, token, outcome="failed", dead_letter=True, error=error)
    return token


async def _dead_letters(client, **params: object) -> list[dict]:
    response = await client.get("/v1/dead-letters", headers=ADMIN, params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]  # type: ignore[no-any-return]


async def test_a_request_failed_for_good_is_kept_with_its_payload_and_error(client):
    world = await make_world(client)
    server = await world.server()
    token = await _failed_for_good(world, server, {"order": 7}, error="card declined")
    # An ordinary failure is not kept.
    plain = (await world.insert({"order": 8}))["token"]
    await world.select(server)
    await world.end(server, plain, outcome="failed")

    [listed] = await _dead_letters(client)
    assert listed["token"] == token and listed["reason"] == "failed" and listed["error"] == "card declined"
    assert listed["service_class"] == "ONLINE" and listed["deliveries"] == 1 and listed["life"] == 1
    assert listed["last_server_id"] is not None and listed["payload"] is None
    shown = (await client.get(f"/v1/dead-letters/{token}", headers=ADMIN)).json()
    assert shown["payload"] == {"order": 7} and shown["died_at"] >= shown["inserted_at"]
    assert await _dead_letters(client, service_class="BATCH") == []
    assert await _dead_letters(client, reason="max_deliveries") == []
    assert [d["token"] for d in await _dead_letters(client, application_environment="PAYROLL", reason="failed")] == [token]
    assert await _dead_letters(client, since="2999-01-01T00:00:00Z") == []
    assert [d["token"] for d in await _dead_letters(client, since=shown["died_at"], until=shown["died_at"])] == [token]
    assert await _dead_letters(client, since=shown["died_at"], until="2000-01-01T00:00:00Z") == []  # none: not refused


async def test_a_request_abandoned_after_its_last_delivery_is_a_dead_letter(client):
    world = await make_world(client, policy_document(completion_time_ms=300, max_deliveries=1))
    server = await world.server()
    token = (await world.insert({"n": 1}))["token"]
    await world.select(server)
    dead = await eventually(lambda: _dead_letters(client), what="the abandoned request in the dead letters")
    assert [(d["token"], d["reason"], d["deliveries"]) for d in dead] == [(token, "max_deliveries", 1)]


async def test_dead_letter_needs_a_failure_and_bulk_actions_need_a_filter(client):
    world = await make_world(client)
    server = await world.server()
    token = (await world.insert())["token"]
    await world.select(server)
    refused = await world.end(server, token, outcome="completed", dead_letter=True, expect=422)
    assert refused.json()["error"]["code"] == "validation_failed"
    for action in ("retry", "discard"):
        response = await client.post(f"/v1/dead-letters:{action}", headers=ADMIN, json={})
        assert response.status_code == 422, response.text
    assert (await client.get("/v1/dead-letters/nope", headers=ADMIN)).status_code == 404
    for cursor in ("x", "", "\u0661_N~A~1", "1_N~A"):  # the schema's pattern says what a cursor is
        bad_cursor = await client.get("/v1/dead-letters", headers=ADMIN, params={"cursor": cursor})
        assert bad_cursor.json()["error"]["code"] == "validation_failed", bad_cursor.text
    viewer = await client.post("/v1/dead-letters:retry", json={"all": True})
    assert viewer.status_code == 401


async def test_concurrent_retries_on_two_replicas_queue_it_once_under_its_token(client, other, app):
    world = await make_world(client)
    server = await world.server()
    token = await _failed_for_good(world, server, {"n": "again"})

    answers = await asyncio.gather(
        *(replica.post(f"/v1/dead-letters/{token}:retry", headers=ADMIN, json={}) for replica in (client, other) * 8)
    )
    assert Counter(a.status_code for a in answers) == {200: 1, 404: 15}
    [retried] = [a.json() for a in answers if a.status_code == 200]
    assert retried == {"token": token, "service_class": "ONLINE", "position": "back", "life": 2}
    assert await _dead_letters(client) == []

    # Its server is given a token that names its second life: the first life's late end, from the very server that
    # holds the second, is told that life ended and ends nothing.
    items = (await world.select(server, max_items=10)).json()["items"]
    assert [(i["token"], i["deliveries"], i["payload"]) for i in items] == [(f"{token}~2", 1, {"n": "again"})]
    assert (await world.select(server, max_items=10, expect=None)).status_code == 409  # at capacity: nothing else
    late = await world.end(server, token, expect=409)
    assert late.json()["error"]["code"] == "already_ended", late.text
    assert (await world.client.post(f"/v1/work/{token}/begin", headers=world.server_key, json={"connect_token": server})).status_code == 409
    await world.end(server, f"{token}~2")
    # Two records of the token: its first life failed, its second completed.
    root = app.state.wlm.settings.records_dir
    table = await eventually(lambda: (t := records.read(root)).num_rows == 2 and t, what="both lives' records")
    assert sorted((r["token"], r["life"], r["outcome"]) for r in table.to_pylist()) == [(token, 1, "failed"), (token, 2, "completed")]

    audit = (await client.get("/v1/audit", headers=ADMIN, params={"action": "dead_letter.retry"})).json()["items"]
    assert [(e["target"], e["detail"]["life"]) for e in audit] == [(token, 2)]


async def test_a_retry_goes_to_the_front_or_the_back_as_asked(client):
    world = await make_world(client)
    server = await world.server(tasks=10)
    front = await _failed_for_good(world, server, {"n": "front"})
    back = await _failed_for_good(world, server, {"n": "back"})
    queued = [(await world.insert({"n": i}))["token"] for i in range(2)]
    for token, position in ((front, "front"), (back, "back")):
        response = await client.post(f"/v1/dead-letters/{token}:retry", headers=ADMIN, json={"position": position})
        assert response.status_code == 200, response.text
    items = (await world.select(server, max_items=10)).json()["items"]
    assert [i["token"] for i in items] == [f"{front}~2", *queued, f"{back}~2"]  # a second life's token names it


async def test_bulk_retry_and_discard_by_filter_page_through_every_match(client):
    world = await make_world(client)
    server = await world.server(tasks=20)
    online = [await _failed_for_good(world, server, {"n": i}) for i in range(3)]
    batch = [await _failed_for_good(world, server, {"n": i}, classification=BATCH) for i in range(4)]

    # Pages of 2 in the order they died, each once.
    seen, cursor = [], None
    while True:
        page = (await client.get("/v1/dead-letters", headers=ADMIN, params={"limit": 2, **({"cursor": cursor} if cursor else {})})).json()
        seen += [d["token"] for d in page["items"]]
        if (cursor := page["next_cursor"]) is None:
            break
    assert seen == [*online, *batch]

    retried = (await client.post("/v1/dead-letters:retry", headers=ADMIN, json={"service_class": "BATCH", "position": "front"})).json()
    assert retried["matched"] == 4 and retried["done"] == 4 and sorted(retried["tokens"]) == sorted(batch)
    discarded = (await client.post("/v1/dead-letters:discard", headers=ADMIN, json={"all": True})).json()
    assert discarded["done"] == 3 and sorted(discarded["tokens"]) == sorted(online)
    assert await _dead_letters(client) == []
    assert (await client.delete(f"/v1/dead-letters/{online[0]}", headers=ADMIN)).status_code == 404
    items = (await world.select(server, max_items=20)).json()["items"]
    assert sorted(i["token"] for i in items) == sorted(f"{token}~2" for token in batch)
    actions = [e["action"] for e in (await client.get("/v1/audit", headers=ADMIN)).json()["items"]]
    assert actions.count("dead_letter.retry") == 1 and actions.count("dead_letter.discard") == 1


async def test_the_dead_letter_count_is_served_alike_by_two_replicas(client, other):
    world = await make_world(client)
    server = await world.server(tasks=5)
    for i in range(2):
        await _failed_for_good(world, server, {"n": i})

    async def count(replica) -> float:
        text = (await replica.get("/metrics")).text
        [family] = [f for f in text_string_to_metric_families(text) if f.name == "wlm_dead_letters"]
        return sum(s.value for s in family.samples if s.labels["application_environment"] == "PAYROLL")

    assert await count(client) == await count(other) == 2
