"""Each script of a request's life, run through the queue store on a real Redis: its happy path and every return
code it can answer. The scripts read Redis's clock themselves (one clock for every replica); a lease that has
passed is written as one, so no test waits."""

from __future__ import annotations

import json

import pytest
from redis.asyncio import RedisCluster

from app.errors import AppError, Conflict, Fenced, NotFound, TooManyRequests
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs, EndResult, Reassigned
from tests.queues.conftest import CONFIG, OTHER_QUEUE_MANAGER, OTHER_SERVER, QUEUE_MANAGER, SERVER, meta_of, request
from tests.redis_cluster import on_one_server_and_a_cluster  # noqa: F401 - the module runs on both


async def queued(store: QueueStore, k: AeKeys, count: int = 1, service_class: str = "ONLINE") -> list[str]:
    return await store.insert(k, QUEUE_MANAGER, [request(service_class) for _ in range(count)], CONFIG.backlog_limit)


async def held(store: QueueStore, k: AeKeys, server: int = SERVER, tasks: int = 5) -> str:
    """A request `server` selected."""
    await store.register_server(k, server, worker_tasks=tasks, worker_weight=1, overflow=False)
    (request_id,) = await queued(store, k)
    (item,) = (await store.select(k, CONFIG, server, 1, begin=False)).items
    assert item.id == request_id
    return request_id


def expect(error: AppError | None, error_class: type[AppError], code: str, **details: object) -> None:
    assert isinstance(error, error_class) and error.code == code, error
    assert {name: error.details[name] for name in details} == details


# ---- insert ----------------------------------------------------------------------------------------------------


async def test_insert_queues_in_order_and_repeats_an_idempotent_insert(store, k):
    first = request(idempotency_key="once")
    ids = await store.insert(k, QUEUE_MANAGER, [first, request()], CONFIG.backlog_limit)
    assert ids == [first.id, ids[1]]
    assert await store.redis.lrange(k.front("ONLINE:ind"), 0, -1) == ids
    assert (await meta_of(store, k, first.id))["state"] == "q"
    again = await store.insert(k, QUEUE_MANAGER, [request(idempotency_key="once")], CONFIG.backlog_limit)
    assert again == [first.id]
    assert await store.redis.hget(k.depth, "ONLINE") == "2"


async def test_insert_beyond_the_backlog_limit_writes_nothing(store, k):
    await queued(store, k, CONFIG.backlog_limit - 1)
    with pytest.raises(TooManyRequests) as refused:
        await queued(store, k, 2)
    expect(refused.value, TooManyRequests, "backlog_limit", service_class="ONLINE", depth=4, backlog_limit=5, reason_code="BACKLOG_LIMIT")
    assert await store.redis.hget(k.depth, "ONLINE") == "4"


# ---- select ----------------------------------------------------------------------------------------------------


async def test_select_takes_the_most_important_class_first(store, k):
    (batch,) = await queued(store, k, service_class="BATCH")
    (online,) = await queued(store, k, service_class="ONLINE")
    await store.register_server(k, SERVER, worker_tasks=5, worker_weight=1, overflow=False)
    result = await store.select(k, CONFIG, SERVER, 5, begin=False)
    assert result.status is ReturnCode.OK and result.refusal is None
    assert [item.id for item in result.items] == [online, batch]
    assert [item.meta["state"] for item in result.items] == ["s", "s"]
    assert await store.redis.hget(k.inflight, str(SERVER)) == "2"


async def test_a_class_with_no_list_is_passed_over_with_one_look(store, k):
    """A class none of whose lists exists costs a select one EXISTS: no pop, and no look for swept queues while
    nothing of the environment is swept. (The first select looks at the queues' heads for promotion: the second
    does not, nothing being due.)"""
    await store.register_server(k, SERVER, worker_tasks=5, worker_weight=1, overflow=False)
    (online,) = await queued(store, k, service_class="ONLINE")
    assert [item.id for item in (await store.select(k, CONFIG, SERVER, 5, begin=False)).items] == [online]
    # On a cluster, the statistics of the master of the environment's slot.
    node = {"target_nodes": store.redis.get_node_from_key(k.req)} if isinstance(store.redis, RedisCluster) else {}
    await store.redis.config_resetstat(**node)
    assert (await store.select(k, CONFIG, SERVER, 5, begin=False)).items == []
    stats = await store.redis.info("commandstats", **node)
    assert stats["cmdstat_exists"]["calls"] == len(CONFIG.class_order)
    assert not {"cmdstat_lpop", "cmdstat_hexists"} & stats.keys()


async def test_select_and_begin_begins_what_it_selects(store, k):
    (request_id,) = await queued(store, k)
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=True)).items
    assert item.id == request_id and item.meta["state"] == "b" and item.meta["begun"] == item.meta["selected"]


async def test_select_refuses_a_server_not_registered(store, k):
    result = await store.select(k, CONFIG, SERVER, 1, begin=False)
    assert result.status is ReturnCode.SERVER_NOT_REGISTERED and result.items == []
    expect(result.refusal, Conflict, "server_not_registered")


async def test_select_refuses_a_server_whose_worker_tasks_are_exhausted(store, k):
    await held(store, k, tasks=1)
    await queued(store, k)
    result = await store.select(k, CONFIG, SERVER, 1, begin=False)
    assert result.status is ReturnCode.WORKER_TASKS_EXHAUSTED
    expect(result.refusal, Conflict, "worker_tasks_exhausted", in_flight=1, worker_tasks=1)


async def test_select_refuses_an_overflow_server_while_another_has_capacity(store, k):
    await queued(store, k)
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    await store.register_server(k, OTHER_SERVER, worker_tasks=1, worker_weight=1, overflow=True)
    result = await store.select(k, CONFIG, OTHER_SERVER, 1, begin=False)
    assert result.status is ReturnCode.OVERFLOW_NOT_NEEDED
    expect(result.refusal, Conflict, "overflow_not_needed")


async def test_select_tells_a_surplus_server_to_end_after_ending_what_it_asked(store, k):
    request_id = await held(store, k)
    await store.environments.retire_servers(k, [SERVER])
    await queued(store, k)
    result = await store.select(k, CONFIG, SERVER, 1, begin=False, ends=[EndArgs(request_id, "completed", None)])
    assert result.status is ReturnCode.SERVER_SURPLUS and result.items == []
    expect(result.refusal, Conflict, "server_surplus")
    assert [end.code for end in result.ended] == [ReturnCode.OK]
    assert result.ended[0].record["outcome"] == "completed"


# ---- begin, extend, end ------------------------------------------------------------------------------------------


async def test_begin_starts_the_completion_time_again(store, k):
    request_id = await held(store, k)
    lease_ends = await store.begin(k, CONFIG, request_id, SERVER)
    assert await store.redis.zscore(k.leases, request_id) == lease_ends
    assert (await meta_of(store, k, request_id))["state"] == "b"


async def test_begin_refuses_what_it_cannot_begin(store, k):
    request_id = await held(store, k)
    with pytest.raises(NotFound) as unknown:
        await store.begin(k, CONFIG, "no-such-request", SERVER)
    expect(unknown.value, NotFound, "unknown_work")
    await store.register_server(k, OTHER_SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    with pytest.raises(Conflict) as not_holder:
        await store.begin(k, CONFIG, request_id, OTHER_SERVER)
    expect(not_holder.value, Conflict, "not_holder")
    await store.end(k, SERVER, [EndArgs(request_id, "completed", None)])
    with pytest.raises(Conflict) as ended:
        await store.begin(k, CONFIG, request_id, SERVER)
    expect(ended.value, Conflict, "already_ended", outcome="completed")


async def test_extend_renews_every_lease_of_the_server(store, k):
    mine, theirs = await held(store, k), await held(store, k, OTHER_SERVER)
    await store.redis.zadd(k.leases, {mine: 0, theirs: 0})
    assert await store.extend(k, CONFIG, SERVER) == 1
    assert await store.redis.zscore(k.leases, mine) > 0
    assert await store.redis.zscore(k.leases, theirs) == 0


async def test_end_judges_each_request_on_its_own(store, k):
    mine, theirs = await held(store, k), await held(store, k, OTHER_SERVER)
    ends = [
        EndArgs(mine, "completed", '{"ok": true}'),
        EndArgs(theirs, "completed", None),
        EndArgs("no-such-request", "completed", None),
        EndArgs(mine, "failed", None),
    ]
    results = await store.end(k, SERVER, ends)
    assert [r.code for r in results] == [ReturnCode.OK, ReturnCode.NOT_HOLDER, ReturnCode.UNKNOWN_WORK, ReturnCode.ALREADY_ENDED]
    assert results[0].record["outcome"] == "completed" and results[0].record["result"] == '{"ok": true}'
    assert results[3].value == "completed"
    assert await store.redis.hget(k.inflight, str(SERVER)) == "0"
    assert len(await store.outbox.samples(k, 0)) == 1


async def test_a_work_record_is_the_stored_metadata_and_the_end_s_keys_each_once(store, k):
    """The record is the stored metadata's text with the end's keys appended (lua/includes/finish.lua), not encoded
    again: the same members as before, none twice, in the outbox as answered."""
    request_id = await held(store, k)
    stored = json.loads(await store.redis.hget(k.req, request_id))
    (ended,) = await store.end(k, SERVER, [EndArgs(request_id, "failed", '{"path": "a/b"}', 'it "broke"')])
    members = json.loads(ended.value, object_pairs_hook=list)
    assert len({key for key, _ in members}) == len(members)
    end_keys = {"outcome": "failed", "ended": ended.record["ended"], "id": request_id, "result": '{"path": "a/b"}', "error": 'it "broke"'}
    assert dict(members) == stored | end_keys
    assert await store.redis.lindex(k.records, -1) == ended.value


# ---- delete, purge ------------------------------------------------------------------------------------------------


async def test_delete_removes_a_queued_request_and_writes_its_record(store, k):
    (request_id,) = await queued(store, k)
    record = await store.delete(k, request_id, QUEUE_MANAGER)
    assert record["id"] == request_id and record["outcome"] == "deleted"
    assert await meta_of(store, k, request_id) is None
    assert await store.redis.hget(k.depth, "ONLINE") == "0"
    assert await store.redis.llen(k.records) == 1


async def test_delete_refuses_what_it_cannot_delete(store, k):
    selected = await held(store, k)
    (request_id,) = await queued(store, k)
    for request_id_, queue_manager in [("no-such-request", QUEUE_MANAGER), (request_id, OTHER_QUEUE_MANAGER)]:
        with pytest.raises(NotFound) as unknown:  # another queue manager's request is not revealed
            await store.delete(k, request_id_, queue_manager)
        expect(unknown.value, NotFound, "unknown_work")
    with pytest.raises(Conflict) as not_queued:
        await store.delete(k, selected, QUEUE_MANAGER)
    expect(not_queued.value, Conflict, "not_queued", state="selected")
    await store.delete(k, request_id, QUEUE_MANAGER)
    with pytest.raises(Conflict) as ended:
        await store.delete(k, request_id, QUEUE_MANAGER)
    expect(ended.value, Conflict, "already_ended", outcome="deleted")


async def test_purge_removes_every_queued_request_of_a_queue_manager_page_by_page(store, k):
    mine = await queued(store, k, 4)
    await store.insert(k, OTHER_QUEUE_MANAGER, [request(queue_manager=OTHER_QUEUE_MANAGER)], CONFIG.backlog_limit)
    assert await store.purge(k, QUEUE_MANAGER, page=2) == 4
    assert await store.redis.hmget(k.req, mine) == [None] * len(mine)
    assert await store.redis.hlen(k.req) == 1


# ---- reassign ----------------------------------------------------------------------------------------------------


async def test_reassign_gives_expired_leases_back_and_abandons_the_last_delivery(store, k):
    request_id = await held(store, k)
    await store.redis.zadd(k.leases, {request_id: 0})  # its completion time passed
    assert await store.reassign(k, CONFIG) == Reassigned(1, [])
    assert (await meta_of(store, k, request_id))["state"] == "q"
    assert await store.redis.lrange(k.front("ONLINE:ind"), 0, -1) == [request_id]
    (item,) = (await store.select(k, CONFIG, SERVER, 1, begin=False)).items
    assert item.meta["deliveries"] == CONFIG.max_deliveries
    await store.redis.zadd(k.leases, {request_id: 0})
    assert await store.reassign(k, CONFIG) == Reassigned(0, [request_id])
    # The late end of its last server hears how it ended.
    assert await store.end(k, SERVER, [EndArgs(request_id, "completed")]) == [EndResult(ReturnCode.ALREADY_ENDED, "abandoned")]


async def test_reassign_leaves_leases_that_have_not_passed(store, k):
    await held(store, k)
    assert await store.reassign(k, CONFIG) == Reassigned(0, [])


async def test_reassign_a_servers_work_gives_back_all_it_holds_and_unregisters_it(store, k):
    mine, theirs = await held(store, k), await held(store, k, OTHER_SERVER)
    assert await store.reassign(k, CONFIG, server_id=SERVER) == Reassigned(1, [])
    assert (await meta_of(store, k, mine))["state"] == "q"
    assert (await meta_of(store, k, theirs))["state"] == "s"
    assert not await store.redis.hexists(k.servers, str(SERVER))
    assert not await store.redis.hexists(k.seen, str(SERVER))


async def test_reassign_is_fenced_once_a_newer_scheduler_acted(store, k):
    request_id = await held(store, k)
    await store.redis.zadd(k.leases, {request_id: 0})
    assert await store.reassign(k, CONFIG, epoch=2) == Reassigned(1, [])
    for server_id in (None, SERVER):
        with pytest.raises(Fenced) as fenced:
            await store.reassign(k, CONFIG, server_id=server_id, epoch=1)
        expect(fenced.value, Fenced, "fenced", epoch=2)
    assert await store.redis.hexists(k.servers, str(SERVER))
