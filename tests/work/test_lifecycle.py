"""Every transition of a work request and every refusal, on real Redis and databases."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Literal

import pytest

from app.connections.departures import purge_departed_again
from app.connections.records import departed_key
from app.work.long_poll import Dispatcher, Waiter
from tests.conftest import ADMIN
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both
from tests.waiting import eventually
from tests.work.conftest import BATCH, ONLINE, make_world, policy_document

pytestmark = pytest.mark.asyncio


async def test_enclaves_classify_and_dependents_keep_the_parent_class(world):
    qm = world.qm
    created = await world.client.post(
        "/v1/enclaves", headers=qm, json={"connect_token": world.qm_token, "classification": {"userid": "ATM7", "transaction_name": "CASH"}}
    )
    assert created.status_code == 201, created.text
    parent = created.json()
    assert (parent["service_class"], parent["report_class"], parent["dependent"]) == ("ONLINE", "CASHA", False)
    child = (
        await world.client.post(
            "/v1/enclaves",
            headers=qm,
            json={"connect_token": world.qm_token, "parent": parent["token"], "classification": {"transaction_class": "RPT1"}},
        )
    ).json()
    assert (child["service_class"], child["report_class"], child["dependent"]) == ("ONLINE", "CASHA", True)
    queued = await world.insert({"n": 1}, enclave_token=child["token"])
    assert queued["service_class"] == "ONLINE"
    deleted = await world.client.delete(f"/v1/enclaves/{parent['token']}", headers=qm, params={"connect_token": world.qm_token})
    assert deleted.status_code == 204
    gone = await world.client.post(
        "/v1/work",
        headers=qm,
        json={"connect_token": world.qm_token, "application_environment": "PAYROLL", "enclave_token": parent["token"]},
    )
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_enclave"


async def test_full_lifecycle_insert_select_begin_end(world):
    server = await world.server()
    queued = await world.insert({"amount": 12}, userid="alice")
    assert queued["service_class"] == "ONLINE" and queued["report_class"] == "ATMA" and queued["node"] == "LOCAL"
    item = (await world.select(server)).json()["items"][0]
    assert item["token"] == queued["token"] and item["payload"] == {"amount": 12} and item["userid"] == "alice"
    assert item["state"] == "selected" and item["deliveries"] == 1
    begun = await world.client.post(f"/v1/work/{item['token']}/begin", headers=world.server_key, json={"connect_token": server})
    assert begun.status_code == 200 and begun.json()["state"] == "begun"
    ended = (await world.end(server, item["token"], result={"ok": True})).json()
    assert ended["outcome"] == "completed" and ended["response_time_ms"] >= 0
    again = await world.end(server, item["token"], expect=409)
    assert again.json()["error"]["code"] == "already_ended" and again.json()["error"]["outcome"] == "completed"


async def test_fifo_within_a_class(world):
    server = await world.server()
    tokens = [(await world.insert({"n": n}))["token"] for n in range(6)]
    seen = []
    for _ in tokens:
        item = (await world.select(server)).json()["items"][0]
        seen.append(item["token"])
        await world.end(server, item["token"])
    assert seen == tokens


async def test_most_important_class_first_and_dependent_ahead_of_independent(world):
    server = await world.server(tasks=10)
    batch_first = await world.insert({"n": "batch"}, classification=BATCH)
    independent = await world.insert({"n": "online"}, classification=ONLINE)
    enclave = (
        await world.client.post("/v1/enclaves", headers=world.qm, json={"connect_token": world.qm_token, "classification": ONLINE})
    ).json()
    dependent_enclave = (
        await world.client.post("/v1/enclaves", headers=world.qm, json={"connect_token": world.qm_token, "parent": enclave["token"]})
    ).json()
    dependent = await world.insert({"n": "dependent"}, enclave_token=dependent_enclave["token"])
    items = (await world.select(server, max_items=10)).json()["items"]
    assert [i["token"] for i in items] == [dependent["token"], independent["token"], batch_first["token"]]


async def test_max_items_is_bounded_by_worker_tasks(world):
    server = await world.server(tasks=4)
    for n in range(6):
        await world.insert({"n": n})
    assert len((await world.select(server, max_items=10)).json()["items"]) == 4
    full = await world.select(server, expect=409, max_items=1)
    assert full.json()["error"] == {
        "code": "worker_tasks_exhausted",
        "message": "the server already holds as many requests as it has worker tasks",
        "in_flight": 4,
        "worker_tasks": 4,
    }


async def test_select_with_begin_and_end_in_one_call(world):
    server = await world.server()
    first, second = await world.insert({"n": 1}), await world.insert({"n": 2})
    item = (await world.select(server, begin=True)).json()["items"][0]
    assert item["token"] == first["token"] and item["state"] == "begun"
    result = (await world.select(server, begin=True, end=[{"token": item["token"], "outcome": "completed"}])).json()
    assert result["ended"][0]["token"] == first["token"] and result["items"][0]["token"] == second["token"]


async def test_nothing_in_time_is_204(world):
    server = await world.server()
    started = time.monotonic()
    response = await world.select(server, expect=204, wait_seconds=0.3)
    # It waited its time (a lower bound holds on any machine), and not for much longer (a bound generous for a busy one).
    assert 0.25 <= time.monotonic() - started < 5.0 and response.content == b""


class _WatchedEvent(asyncio.Event):
    """A waiting select's event that says whether the select waits on it now, how often it began to wait, and how
    often something (an insert notification, the stop notice) set it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = False
        self.waits = 0
        self.sets = 0

    async def wait(self) -> Literal[True]:
        self.waiting, self.waits = True, self.waits + 1
        try:
            return await super().wait()
        finally:
            self.waiting = False

    def set(self) -> None:
        self.sets += 1
        super().set()


class _Selects:
    """This process's long-polling selects, seen through its dispatcher: each one's event, in the order they register."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.events: list[_WatchedEvent] = []
        self._register = dispatcher.register

    def register(self, waiter: Waiter) -> None:
        waiter.event = event = _WatchedEvent()
        self.events.append(event)
        self._register(waiter)

    async def until_waiting(self, count: int, since: int = 0) -> None:
        """Until `count` selects registered after the first `since` wait for work (their first attempt found none)."""
        await eventually(lambda: sum(event.waiting for event in self.events[since:]) == count, what=f"{count} selects waiting")


@pytest.fixture
def selects(app, monkeypatch: pytest.MonkeyPatch) -> _Selects:
    dispatcher = app.state.wlm.dispatcher
    watched = _Selects(dispatcher)
    monkeypatch.setattr(dispatcher, "register", watched.register)
    return watched


async def test_a_waiting_server_is_answered_at_once_on_insert(world, selects):
    server = await world.server()
    waiting = asyncio.create_task(world.select(server, wait_seconds=10))
    await selects.until_waiting(1)
    queued = await world.insert({"n": "late"})
    response = await asyncio.wait_for(waiting, 5)
    assert response.json()["items"][0]["token"] == queued["token"]
    (event,) = selects.events
    assert event.sets >= 1  # woken by the insert notification, not found by the 1 s polling fallback


async def test_waiting_selects_answer_at_once_when_the_process_is_told_to_stop(app, world, selects):
    server = await world.server()
    waiting = asyncio.create_task(world.select(server, expect=None, wait_seconds=30))
    await selects.until_waiting(1)
    app.state.wlm.shutdown.give()
    response = await asyncio.wait_for(waiting, 10)  # well inside its 30 s
    (event,) = selects.events
    assert response.status_code == 204 and event.sets >= 1  # woken by the notice, not by the polling fallback
    # Once told, no select waits: work there is still goes out, and none is left waiting for.
    assert (await asyncio.wait_for(world.select(server, expect=None, wait_seconds=30), 10)).status_code == 204
    assert not any(event.waits for event in selects.events[1:])
    queued = await world.insert({"n": "after the notice"})
    assert (await world.select(server, wait_seconds=30)).json()["items"][0]["token"] == queued["token"]


async def _race(world, selects: _Selects, servers: dict[str, str]) -> str:
    """All `servers` wait in select; one request is inserted; returns who got it (after ending it)."""
    since = len(selects.events)
    waits = {name: asyncio.create_task(world.select(token, expect=None, wait_seconds=5)) for name, token in servers.items()}
    await selects.until_waiting(len(servers), since)
    await world.insert({"race": True})
    await asyncio.wait(waits.values(), return_when=asyncio.FIRST_COMPLETED, timeout=5)
    await asyncio.sleep(0.3)  # nothing must happen: time for a second winner to show, were there one
    winners = [name for name, task in waits.items() if task.done() and task.result().status_code == 200]
    for task in waits.values():
        task.cancel()
    assert len(winners) == 1, winners
    await world.end(servers[winners[0]], waits[winners[0]].result().json()["items"][0]["token"])
    return winners[0]


async def test_highest_weight_waiter_first_round_robin_among_equals(world, selects):
    servers = {"heavy": await world.server(weight=5), "a": await world.server(weight=1), "b": await world.server(weight=1)}
    assert await _race(world, selects, servers) == "heavy"
    assert await _race(world, selects, servers) == "heavy"  # still the heaviest with capacity
    await world.client.delete(f"/v1/connections/{servers.pop('heavy')}", headers=world.server_key)
    winners = [await _race(world, selects, servers) for _ in range(4)]
    assert winners in (["a", "b", "a", "b"], ["b", "a", "b", "a"]), winners


async def test_overflow_server_only_when_every_other_is_at_capacity(world):
    regular = await world.server(tasks=1)
    overflow = await world.server(tasks=1, overflow=True)
    await world.insert({"n": 1})
    await world.insert({"n": 2})
    await world.select(overflow, expect=204)
    await world.select(regular)
    item = (await world.select(overflow)).json()["items"][0]
    assert item["payload"] == {"n": 2}


async def test_refusals(world, app):
    server = await world.server()
    other = await world.server()
    queued = await world.insert({"n": 1})
    not_selected = await world.end(server, queued["token"], expect=409)
    assert not_selected.json()["error"]["code"] == "not_holder"
    item = (await world.select(server)).json()["items"][0]
    wrong_server = await world.end(other, item["token"], expect=409)
    assert wrong_server.json()["error"]["code"] == "not_holder"
    for token in ("nonsense", "LOCAL~PAYROLL~doesnotexist", "LOCAL~OTHER~x"):
        response = await world.client.post(f"/v1/work/{token}/end", headers=world.server_key, json={"connect_token": server})
        assert response.status_code in (404, 409), (token, response.text)
    unknown = await world.client.post("/v1/work/LOCAL~PAYROLL~doesnotexist/end", headers=world.server_key, json={"connect_token": server})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_work"
    bad_outcome = await world.client.post(
        f"/v1/work/{item['token']}/end", headers=world.server_key, json={"connect_token": server, "outcome": "exploded"}
    )
    assert bad_outcome.status_code == 422
    limit = app.state.wlm.settings.max_payload_bytes
    too_big = await world.client.post(
        "/v1/work",
        headers=world.qm,
        json={"connect_token": world.qm_token, "application_environment": "PAYROLL", "classification": ONLINE, "payload": "x" * limit},
    )
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "payload_too_large"
    as_server = await world.client.post("/v1/work/select", headers=world.server_key, json={"connect_token": world.qm_token})
    assert as_server.status_code == 404  # a queue manager's token is not this server principal's
    no_class = await world.client.post(
        "/v1/work", headers=world.qm, json={"connect_token": world.qm_token, "application_environment": "PAYROLL"}
    )
    assert no_class.status_code == 422 and no_class.json()["error"]["errors"][0]["path"] == "enclave_token"
    unknown_ae = await world.client.post(
        "/v1/work", headers=world.qm, json={"connect_token": world.qm_token, "application_environment": "NOPE", "classification": ONLINE}
    )
    assert unknown_ae.status_code == 404 and unknown_ae.json()["error"]["code"] == "unknown_application_environment"
    big_result = await world.end(server, item["token"], expect=413, result="y" * 10_000)
    assert big_result.json()["error"]["code"] == "payload_too_large"


async def test_backlog_limit_is_429_and_batches_are_all_or_nothing(client):
    world = await make_world(client, policy_document(backlog_limit=3))
    await world.insert({"n": 0})
    batch = {
        "connect_token": world.qm_token,
        "application_environment": "PAYROLL",
        "items": [{"classification": ONLINE, "payload": {"n": n}} for n in range(1, 4)],
    }
    refused = await client.post("/v1/work:batch", headers=world.qm, json=batch)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert (
        error["code"] == "backlog_limit" and error["reason_code"] == "BACKLOG_LIMIT" and error["depth"] == 1 and error["backlog_limit"] == 3
    )
    batch["items"] = batch["items"][:2]
    accepted = await client.post("/v1/work:batch", headers=world.qm, json=batch)
    assert accepted.status_code == 201 and len(accepted.json()["items"]) == 2
    full = await world.insert({"n": 9}, expect=429)
    assert full["error"]["service_class"] == "ONLINE"
    other_class = await world.insert({"n": 10}, classification=BATCH)  # the limit is per class queue
    server = await world.server(tasks=10)
    payloads = [i["payload"]["n"] for i in (await world.select(server, max_items=10)).json()["items"]]
    assert payloads == [0, 1, 2, 10] and other_class["service_class"] == "BATCH"


async def test_batch_limits(world):
    too_many = {"connect_token": world.qm_token, "application_environment": "PAYROLL", "items": [{"classification": ONLINE}] * 1001}
    response = await world.client.post("/v1/work:batch", headers=world.qm, json=too_many)
    assert response.status_code == 422
    one_bad = {
        "connect_token": world.qm_token,
        "application_environment": "PAYROLL",
        "items": [{"classification": ONLINE}, {"classification": {"colour": "red"}}],
    }
    response = await world.client.post("/v1/work:batch", headers=world.qm, json=one_bad)
    assert response.status_code == 422 and response.json()["error"]["errors"][0]["path"] == "items[1].classification.colour"
    server = await world.server()
    await world.select(server, expect=204)  # nothing of the refused batches was queued


async def test_a_batch_of_mixed_classifications_classifies_each_item_as_its_own(world):
    # Items classified once per distinct classification within a batch: each still gets its own class, in order,
    # and the same attributes named in another order classify alike.
    reordered = {"userid": "ATM01", "transaction_name": "CASH"}
    items = [ONLINE, BATCH, ONLINE, dict(reversed(list(reordered.items()))), BATCH, reordered]
    body = {"connect_token": world.qm_token, "application_environment": "PAYROLL", "items": [{"classification": c} for c in items]}
    response = await world.client.post("/v1/work:batch", headers=world.qm, json=body)
    assert response.status_code == 201, response.text
    singly = [(await world.insert({"n": i}, classification=c))["service_class"] for i, c in enumerate(items)]
    assert (
        [item["service_class"] for item in response.json()["items"]] == singly == ["ONLINE", "BATCH", "ONLINE", "ONLINE", "BATCH", "ONLINE"]
    )


async def test_idempotent_insert_returns_the_first_result(world):
    body = {
        "connect_token": world.qm_token,
        "application_environment": "PAYROLL",
        "classification": ONLINE,
        "payload": 1,
        "idempotency_key": "order-42",
    }
    first = await world.client.post("/v1/work", headers=world.qm, json=body)
    second = await world.client.post("/v1/work", headers=world.qm, json=body)
    assert first.status_code == second.status_code == 201
    assert first.json()["token"] == second.json()["token"] and second.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    server = await world.server(tasks=5)
    assert len((await world.select(server, max_items=5)).json()["items"]) == 1
    repeated = {
        "connect_token": world.qm_token,
        "application_environment": "PAYROLL",
        "items": [{"classification": ONLINE, "idempotency_key": "k"}] * 2,
    }
    assert (await world.client.post("/v1/work:batch", headers=world.qm, json=repeated)).status_code == 422


async def test_delete_only_while_queued_and_only_by_its_queue_manager(world, exit_receiver):
    queued = await world.insert({"n": 1})
    other_qm = (
        await world.client.post(
            "/v1/connections", headers=world.qm, json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK2"}
        )
    ).json()["token"]
    foreign = await world.client.delete(f"/v1/work/{queued['token']}", headers=world.qm, params={"connect_token": other_qm})
    assert foreign.status_code == 404
    deleted = await world.client.delete(f"/v1/work/{queued['token']}", headers=world.qm, params={"connect_token": world.qm_token})
    assert deleted.status_code == 200 and deleted.json()["outcome"] == "deleted"
    again = await world.client.delete(f"/v1/work/{queued['token']}", headers=world.qm, params={"connect_token": world.qm_token})
    assert again.status_code == 409 and again.json()["error"]["outcome"] == "deleted"
    selected = await world.insert({"n": 2})
    server = await world.server()
    assert (await world.select(server)).json()["items"][0]["token"] == selected["token"]
    late = await world.client.delete(f"/v1/work/{selected['token']}", headers=world.qm, params={"connect_token": world.qm_token})
    assert late.status_code == 409 and late.json()["error"] == {
        "code": "not_queued",
        "message": "the work request is no longer queued (selected by a server)",
        "state": "selected",
    }
    assert exit_receiver.calls == []  # this queue manager named no exit


async def test_server_disconnect_gives_its_work_back_to_the_front(world):
    leaving = await world.server(tasks=2)
    tokens = [(await world.insert({"n": n}))["token"] for n in range(3)]
    held = [i["token"] for i in (await world.select(leaving, max_items=2)).json()["items"]]
    gone = await world.client.delete(f"/v1/connections/{leaving}", headers=world.server_key)
    assert gone.json()["requeued"] == 2
    assert held == tokens[:2]
    staying = await world.server(tasks=3)
    items = (await world.select(staying, max_items=3)).json()["items"]
    assert [i["token"] for i in items] == tokens  # back at the front, in their original order
    assert [i["deliveries"] for i in items] == [2, 2, 1]
    late = await world.client.post("/v1/work/select", headers=world.server_key, json={"connect_token": leaving})
    assert late.status_code == 404


async def test_queue_manager_disconnect_purges_its_queued_work(world):
    for n in range(3):
        await world.insert({"n": n})
    gone = await world.client.delete(f"/v1/connections/{world.qm_token}", headers=world.qm)
    assert gone.status_code == 200 and gone.json()["purged"] == 3
    refused = await world.client.post(
        "/v1/work", headers=world.qm, json={"connect_token": world.qm_token, "application_environment": "PAYROLL", "classification": ONLINE}
    )
    assert refused.status_code == 404


async def test_terminate_0c14_when_the_environment_leaves_the_policy(world):
    server = await world.server()
    changed = json.loads(policy_document())
    changed["application_environments"][0]["name"] = "OTHERAPP"
    response = await world.client.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=json.dumps(changed))
    assert response.status_code == 200
    result = (await world.select(server, wait_seconds=1)).json()
    assert result["terminate"] is True and result["reason_code"] == "0C14" and result["items"] == []


async def test_a_policy_cannot_remove_a_class_that_still_has_work(world):
    queued = await world.insert({"n": 1}, classification={"transaction_class": "RPT1"})  # REPORTS
    enclave = (
        await world.client.post(
            "/v1/enclaves", headers=world.qm, json={"connect_token": world.qm_token, "classification": {"transaction_class": "RPT1"}}
        )
    ).json()
    without_reports = json.loads(policy_document())
    without_reports["service_classes"] = [sc for sc in without_reports["service_classes"] if sc["name"] != "REPORTS"]
    without_reports["classification"][0]["rules"] = without_reports["classification"][0]["rules"][:1]
    headers = {**ADMIN, "Content-Type": "application/json"}
    refused = await world.client.put("/v1/policy", headers=headers, content=json.dumps(without_reports))
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["in_use"] == [{"application_environment": "PAYROLL", "node": "LOCAL", "service_class": "REPORTS"}]
    server = await world.server()
    item = (await world.select(server)).json()["items"][0]  # still selected: held work counts too
    assert item["token"] == queued["token"]
    assert (await world.client.put("/v1/policy", headers=headers, content=json.dumps(without_reports))).status_code == 409
    await world.end(server, item["token"])
    installed = await world.client.put("/v1/policy", headers=headers, content=json.dumps(without_reports))
    assert installed.status_code == 200 and installed.json()["changed"] is True
    stale = await world.insert({"n": 2}, enclave_token=enclave["token"], expect=409)
    assert stale["error"]["code"] == "enclave_class_removed"


async def test_an_insert_let_through_by_a_stale_cached_connection_is_purged_again(world, app):
    """Another process may hold a queue manager's connection in its cache for a moment after the disconnect; an
    insert it lets through in that moment is purged by the second pass, not left behind."""
    state = app.state.wlm
    await world.insert({"n": 0})  # the connection is now in this process's cache
    cached = {key: value for key, value in state.connection_cache._entries.items()}
    gone = await world.client.delete(f"/v1/connections/{world.qm_token}", headers=world.qm)
    assert gone.status_code == 200 and gone.json()["purged"] == 1
    state.connection_cache._entries.update(cached)  # as another process still holding its copy
    late = await world.insert({"n": 1})
    keys = state.queues.keys("LOCAL", "PAYROLL")
    assert int(await state.redis.hget(keys.depth, late["service_class"])) == 1
    departed = departed_key(state.queues.prefix)
    assert await purge_departed_again(state.queues, await state.policies.active()) == 0  # not due for seconds
    assert int(await state.redis.hget(keys.depth, late["service_class"])) == 1
    await state.redis.zadd(departed, {member: 0 for member in await state.redis.zrange(departed, 0, -1)})  # due now

    async def none_departed() -> bool:
        return await state.redis.zcard(departed) == 0

    await eventually(none_departed, what="the background duty's turn to purge again")  # it looks every 0.1 s
    assert int(await state.redis.hget(keys.depth, late["service_class"])) == 0
    assert await state.redis.zcard(departed) == 0
