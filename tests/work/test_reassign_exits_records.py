"""Reassignment after the completion time, abandonment, exit calls with retries and signatures, and work
records on Parquet; the background duties run as in production (every 0.1-0.2 s in these tests)."""

from __future__ import annotations

import asyncio
import json
import os

import pyarrow.parquet as pq
import pytest

from app.work import records
from app.work.exits import SIGNATURE_HEADER, verify
from app.work.long_poll import POLL_FALLBACK_SECONDS
from spark_jobs.contract.records import GROUP_KEYS, GROUP_KEYS_FOOTER, OUTBOX_RANGES_FOOTER
from tests.conftest import ADMIN
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both
from tests.waiting import eventually
from tests.work.conftest import make_world, policy_document

pytestmark = pytest.mark.asyncio
# Long enough for several passes of the duties even on a loaded machine: a repeat would show within it.
NOTHING_HAPPENS_S = 1.0


async def _queued_and_in_flight(client, expected: tuple[int, int]) -> bool:
    display = (await client.get("/v1/application-environments/PAYROLL", headers=ADMIN)).json()
    return (display["queued_total"], display["in_flight"]) == expected


async def test_expired_request_is_reassigned_to_the_front_then_abandoned(client, exit_receiver):
    world = await make_world(client, policy_document(completion_time_ms=300, max_deliveries=2), exit_url=exit_receiver.url)
    first_server, second_server = await world.server(), await world.server()
    expiring = await world.insert({"n": "slow"})
    item = (await world.select(first_server)).json()["items"][0]
    behind = await world.insert({"n": "behind"})
    # No end within 300 ms: it goes back to the front, ahead of the request queued after it.
    await eventually(lambda: _queued_and_in_flight(client, (2, 0)), what="the expired request given back to the queue")
    again = (await world.select(second_server)).json()["items"][0]
    assert again["token"] == expiring["token"] and again["deliveries"] == 2
    late = await world.end(first_server, item["token"], expect=409)
    assert late.json()["error"]["code"] == "not_holder"  # the old holder's late end: refused, no second record
    # The second delivery expires too: abandoned, the exit is called, and the request behind it is next.
    await eventually(lambda: len(exit_receiver.calls) == 1)
    headers, body = exit_receiver.calls[0]
    event = json.loads(body)
    assert event["event"] == "work.abandoned" and event["token"] == expiring["token"] and event["deliveries"] == 2
    secret = world.exit_secret
    assert verify(secret, headers[SIGNATURE_HEADER], body) and not verify("wrong", headers[SIGNATURE_HEADER], body)
    ended = await world.end(second_server, again["token"], expect=409)
    assert ended.json()["error"] == {"code": "already_ended", "message": "the work request has already ended", "outcome": "abandoned"}
    assert (await world.select(first_server)).json()["items"][0]["token"] == behind["token"]


async def test_begin_and_heartbeat_extend_the_completion_time(client):
    # Time passing is the behaviour here, so these sleeps stay: a 5 s completion time, and every step at least 2 s
    # before the lease it relies on ends (slack against a loaded machine), yet each extension is needed.
    world = await make_world(client, policy_document(completion_time_ms=5000))
    server = await world.server()
    await world.insert({"n": 1})
    item = (await world.select(server)).json()["items"][0]
    for _ in range(3):  # 3 x 2 s > 5 s: only the heartbeats keep it
        await asyncio.sleep(2.0)
        beat = await client.post(f"/v1/connections/{server}/heartbeat", headers=world.server_key)
        assert beat.json()["leases_extended"] == 1
    await asyncio.sleep(2.5)
    begun = await client.post(f"/v1/work/{item['token']}/begin", headers=world.server_key, json={"connect_token": server})
    assert begun.status_code == 200
    await asyncio.sleep(2.8)  # 5.3 s after the last heartbeat (the lease duty looks every 0.1 s): only begin keeps it
    assert (await world.end(server, item["token"])).json()["outcome"] == "completed"


async def test_exit_calls_are_retried_until_delivered(client, exit_receiver):
    world = await make_world(client, exit_url=exit_receiver.url)
    exit_receiver.fail_first = 2
    queued = await world.insert({"n": 1})
    deleted = await client.delete(f"/v1/work/{queued['token']}", headers=world.qm, params={"connect_token": world.qm_token})
    assert deleted.status_code == 200
    await eventually(lambda: len(exit_receiver.calls) == 1, timeout=10)
    event = json.loads(exit_receiver.calls[0][1])
    assert event["event"] == "work.deleted" and event["attempt"] == 3 and event["event_id"] == f"{queued['token']}:deleted"
    await asyncio.sleep(NOTHING_HAPPENS_S)  # nothing must happen: many passes of the exit duty (retries from 0.1 s)
    assert len(exit_receiver.calls) == 1  # delivered once it succeeded, not again


async def test_purge_at_disconnect_calls_the_exit_per_request(client, exit_receiver):
    world = await make_world(client, exit_url=exit_receiver.url)
    tokens = {(await world.insert({"n": n}))["token"] for n in range(3)}
    await client.delete(f"/v1/connections/{world.qm_token}", headers=world.qm)
    await eventually(lambda: len(exit_receiver.calls) == 3)
    assert {json.loads(body)["token"] for _, body in exit_receiver.calls} == tokens
    assert {json.loads(body)["event"] for _, body in exit_receiver.calls} == {"work.purged"}


async def test_every_end_is_one_record_in_parquet(client, app):
    world = await make_world(client, policy_document(completion_time_ms=300, max_deliveries=1))
    server = await world.server(tasks=10)
    ended = await world.insert({"n": "ended"}, userid="alice")
    failed = await world.insert({"n": "failed"}, classification={"transaction_class": "RPT1"})
    deleted = await world.insert({"n": "deleted"})
    abandoned = await world.insert({"n": "abandoned"})
    await client.delete(f"/v1/work/{deleted['token']}", headers=world.qm, params={"connect_token": world.qm_token})
    items = {i["payload"]["n"]: i["token"] for i in (await world.select(server, max_items=10)).json()["items"]}
    await world.end(server, items["ended"], result={"answer": 42})
    await world.end(server, items["failed"], outcome="failed")
    root = app.state.wlm.settings.records_dir

    table = await eventually(lambda: (t := records.read(root)).num_rows == 4 and t)
    rows = {row["token"]: row for row in table.to_pylist()}
    assert {row["outcome"] for row in rows.values()} == {"completed", "failed", "deleted", "abandoned"}
    done = rows[ended["token"]]
    assert (done["service_class"], done["report_class"], done["userid"], done["application_environment"], done["node"]) == (
        "ONLINE",
        "ATMA",
        "alice",
        "PAYROLL",
        "LOCAL",
    )
    assert done["period"] == 1 and done["policy_version"] == 1 and done["deliveries"] == 1 and json.loads(done["result"]) == {"answer": 42}
    assert done["response_time_ms"] == done["queue_time_ms"] + done["execution_time_ms"]
    assert done["server_id"] is not None and done["selected_at"] is not None and done["ended_at"] >= done["inserted_at"]
    assert rows[failed["token"]]["service_class"] == "REPORTS"
    removed = rows[deleted["token"]]
    assert removed["selected_at"] is None and removed["execution_time_ms"] is None and removed["server_id"] is None
    assert rows[abandoned["token"]]["deliveries"] == 1
    files = list(root.glob("date=*/*.parquet"))
    assert files and all(f.parent.name.startswith("date=") for f in files)
    assert not list(root.glob("date=*/.*.tmp"))
    # Each file declares its records' group keys for the nightly report.
    declared = [key for f in files for key in json.loads(pq.read_metadata(f).metadata[GROUP_KEYS_FOOTER])]
    assert {tuple(key[c] for c in GROUP_KEYS) for key in declared} == {tuple(row[c] for c in GROUP_KEYS) for row in rows.values()}
    # ... and the positions its records held in the outbox: the four, each once.
    ranges = [r for f in files for r in json.loads(pq.read_metadata(f).metadata[OUTBOX_RANGES_FOOTER])]
    assert {r["outbox"] for r in ranges} == {app.state.wlm.queues.keys("LOCAL", "PAYROLL").tag}
    assert sorted(p for r in ranges for p in range(r["first"], r["last"] + 1)) == [0, 1, 2, 3]
    await asyncio.sleep(NOTHING_HAPPENS_S)  # nothing must happen: many flushes (every 0.2 s)
    assert records.read(root).num_rows == 4  # the outbox was acknowledged: nothing written twice


async def test_a_record_keeps_its_outbox_position_until_it_is_written(app):
    queues = app.state.wlm.queues
    keys = queues.keys("LOCAL", "NOWHERE")  # no environment of the policy: no duty flushes it
    await queues.redis.rpush(keys.records, "a", "b", "c")
    _, first, entries = await queues.outbox.pending_records(keys, 2)
    assert (first, entries) == (0, ["a", "b"])
    assert await queues.outbox.ack_records(keys, ["a", "b"]) == 2
    assert await queues.outbox.ack_records(keys, ["a", "b"]) == 0  # a second flusher of the same batch drops nothing
    await queues.redis.rpush(keys.records, "d")
    # Counted, the outbox keeps its incarnation.
    incarnation, first, entries = await queues.outbox.pending_records(keys, 10)
    assert (first, entries) == (2, ["c", "d"])
    assert await queues.outbox.pending_records(keys, 10) == (incarnation, 2, ["c", "d"])
    # Redis lost the count: the positions start again at 0, under another incarnation.
    await queues.redis.delete(keys.records_acked)
    again, first, _ = await queues.outbox.pending_records(keys, 10)
    assert again != incarnation and first == 0
    # Redis lost the incarnation: the count goes on under another.
    assert await queues.outbox.ack_records(keys, ["c"]) == 1
    await queues.redis.delete(keys.records_incarnation)
    third, first, entries = await queues.outbox.pending_records(keys, 10)
    assert third not in (incarnation, again) and (first, entries) == (1, ["d"])
    assert await queues.outbox.pending_records(keys, 10) == (third, 1, ["d"])


async def test_a_silent_server_is_taken_for_dead_and_its_work_given_back(client, app):
    world = await make_world(client)  # completion time 60 s: only the silence can bring the request back soon
    # Three times the long poll's retry interval: a retry held up under load (1.5 s once failed so) still shows it alive.
    app.state.wlm.settings.heartbeat_timeout_seconds = 3 * POLL_FALLBACK_SECONDS
    silent, alive = await world.server(), await world.server()
    queued = await world.insert({"n": 1})
    assert (await world.select(silent)).json()["items"][0]["token"] == queued["token"]
    # `alive` long-polls (each retry, at most a second apart, shows it alive); `silent` does nothing. The select
    # returns once the work comes back; its wait is only the bound.
    got = (await world.select(alive, wait_seconds=15)).json()["items"][0]
    assert got["token"] == queued["token"] and got["deliveries"] == 2
    listed = (await client.get("/v1/connections", headers=ADMIN, params={"role": "server"})).json()["items"]
    states = {item["state"]: item["disconnect_reason"] for item in listed}
    assert states == {"active": None, "disconnected": "expired"}
    late = await world.select(silent, expect=404)
    assert late.json()["error"]["code"] == "unknown_connection"


async def test_the_records_writer_runs_below_the_request_serving_processes(app):
    # Its Parquet bursts must not take a core from request handling; the outbox keeps records safe meanwhile.
    writer_niceness = await asyncio.get_running_loop().run_in_executor(records._writer_pool(), os.nice, 0)
    assert writer_niceness >= os.nice(0) + records.WRITER_NICENESS
