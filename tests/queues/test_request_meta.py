"""A request's metadata (app/queues/request_meta.py) reads and writes the JSON the scripts and the requests already
queued have: state written by hand in the layout the service wrote before the typed definition (two-letter keys,
states q/s/b) is served after it, and what the service writes now is that layout byte for byte."""

from __future__ import annotations

import json

from app.queues.keys import AeKeys
from app.queues.request_meta import Enclave, ExitEntry, RequestMeta, RequestState
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs
from app.work.enclave_records import EnclaveRecords
from app.work.exits import body_of
from tests.queues.conftest import CONFIG, SERVER

QM = 7
# A request as the insert wrote it (the script put `seq` and `inserted` first), then a delivery's stamps.
QUEUED = (
    '{"seq":41,"inserted":%d,"sc":"ONLINE","rc":"RPT1","dep":false,"qm":7,"subsystem_type":"CB","subsystem_name":"CICS1",'
    '"userid":"ALICE","enclave":null,"policy":3,"node":"LOCAL","ae":"PAYROLL","state":"q","deliveries":0,"exit":""}'
)


async def _queued_by_hand(store: QueueStore, k: AeKeys, request_id: str) -> None:
    """One request queued as the service wrote it before: its metadata, payload, list entry, depth and class."""
    inserted = await store.clock_ms()
    await store.redis.hset(k.req, request_id, QUEUED % inserted)
    await store.redis.hset(k.payload, request_id, '{"n": 1}')
    await store.redis.rpush(k.front("ONLINE:ind"), request_id)
    await store.redis.hincrby(k.depth, "ONLINE", 1)
    await store.redis.sadd(k.classes, "ONLINE")


async def test_a_request_queued_in_the_old_layout_is_selected_and_ended(store: QueueStore, k: AeKeys) -> None:
    await _queued_by_hand(store, k, "old1")
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=True)).items
    meta = item.meta
    assert (item.id, item.payload) == ("old1", '{"n": 1}')
    assert (meta.service_class, meta.report_class, meta.dependent, meta.queue_manager) == ("ONLINE", "RPT1", False, QM)
    assert (meta.userid, meta.enclave, meta.policy, meta.node, meta.application_environment) == ("ALICE", None, 3, "LOCAL", "PAYROLL")
    assert meta.state is RequestState.BEGUN and meta.deliveries == 1 and meta.server_id == SERVER
    assert meta["seq"] == 41 and meta.place is None
    assert meta.selected is not None and meta.begun == meta.selected >= meta.inserted
    [ended] = await store.end(k, SERVER, [EndArgs("old1", "completed", '{"ok": 1}')])
    record = ended.record
    assert (record.id, record.outcome, record.result, record.life, record.promoted) == ("old1", "completed", '{"ok": 1}', 1, False)
    assert record.ended >= record.begun


async def test_a_dead_letter_in_the_old_layout_is_read_and_retried(store: QueueStore, k: AeKeys) -> None:
    died = await store.clock_ms()
    meta = json.loads(QUEUED % (died - 5000)) | {"state": "b", "server": "7", "selected": died - 100, "deliveries": 2}
    await store.redis.hset(k.dead, "old2", json.dumps({"meta": meta, "payload": '{"n": 2}', "reason": "max_deliveries"}))
    await store.redis.zadd(k.dead_at, {"old2": died})
    letter = await store.dead_letters.get(k, "old2")
    assert letter is not None and letter.reason == "max_deliveries"
    assert (letter.meta.service_class, letter.meta.server_id, letter.meta.deliveries, letter.meta.first_inserted) == ("ONLINE", 7, 2, None)
    retried = await store.dead_letters.retry(k, "old2", "back")
    assert (retried.life, retried.deliveries, retried.state, retried.first_inserted) == (2, 0, RequestState.QUEUED, died - 5000)


async def test_an_enclave_and_an_exit_entry_in_the_old_layout_are_read(store: QueueStore) -> None:
    enclaves = EnclaveRecords(store.context)
    await enclaves.save("old3", Enclave({"sc": "ONLINE", "rc": None, "dep": False, "qm": QM, "policy": 3}), ttl_s=30)
    enclave = await enclaves.get("old3")
    assert enclave is not None and (enclave.service_class, enclave.queue_manager, enclave.policy, enclave.parent) == ("ONLINE", QM, 3, None)
    record = json.loads(QUEUED % 1000) | {"id": "old4", "outcome": "deleted", "ended": 1500}
    entry = ExitEntry.from_json(
        json.dumps({"id": "old4", "qm": QM, "exit": "https://qm.example/exit", "attempt": 1, "record": json.dumps(record)})
    )
    event = json.loads(body_of(entry))
    assert (entry.queue_manager, entry.exit) == (QM, "https://qm.example/exit")
    assert event["token"] == "LOCAL~PAYROLL~old4" and event["attempt"] == 2 and event["removed_at_ms"] == 1500


def test_a_new_request_is_written_in_the_old_layout() -> None:
    meta = RequestMeta.queued(
        service_class="ONLINE",
        report_class="RPT1",
        dependent=False,
        queue_manager=QM,
        subsystem_type="CB",
        subsystem_name="CICS1",
        userid="ALICE",
        enclave=None,
        policy=3,
        node="LOCAL",
        application_environment="PAYROLL",
        exit="",
    )
    stamps = '{"seq":41,"inserted":%d,'
    assert (stamps + meta.to_json().decode()[1:]) == QUEUED


async def test_a_retired_environment_keeps_its_member(store: QueueStore, k: AeKeys) -> None:
    """The retired hash's member names the place as before, so a place retired again is the one member."""
    await store.environments.retire(k, CONFIG, QM)
    await store.environments.retire(k, CONFIG, QM)
    [retired] = await store.environments.retired()
    assert retired.member == json.dumps({"node": k.node, "ae": k.ae, "qm": QM})
    assert (retired.keys, retired.queue_manager) == (k, QM)
