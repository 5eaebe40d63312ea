"""The scripts' pipelined connection (app/redis/pipeline.py): the calls of one turn of the event loop go out in one
write, each caller gets its own reply (also when others were cancelled), errors come back as redis-py raises them,
and a lost connection is opened again."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from app.queues import script_specs as specs
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.redis import pipeline
from app.redis.pipeline import CLIENT_NAME, ScriptPipeline
from app.redis.script_spec import ScriptCall
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, request
from tests.waiting import eventually

CALLS = 60


async def _pipelined_clients(redis: Redis) -> list[dict]:
    return [client for client in await redis.client_list() if client["name"] == CLIENT_NAME.decode()]


async def test_the_calls_of_one_turn_go_out_together_each_caller_getting_its_own_reply(
    store: QueueStore, k: AeKeys, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.insert(k, QUEUE_MANAGER, [request()], 10**6)  # the connection opened
    # Counted at the client: Redis's own read count is server-wide, so any other client on it (a server process
    # left by an earlier test) would add to it.
    writes: list[int] = []
    flush = pipeline._Protocol._flush

    def counted_flush(protocol: pipeline._Protocol) -> None:
        writes.append(len(protocol.outgoing))
        flush(protocol)

    monkeypatch.setattr(pipeline._Protocol, "_flush", counted_flush)
    requests = [request() for _ in range(CALLS)]
    ids = await asyncio.gather(*(store.insert(k, QUEUE_MANAGER, [r], 10**6) for r in requests))
    assert ids == [[r.id] for r in requests]
    # One connection, one write carrying every call; a call per connection would be 60 connections and writes.
    assert len(await _pipelined_clients(store.redis)) == 1
    assert writes == [CALLS]


async def test_a_cancelled_call_leaves_the_replies_of_the_others_in_order(store: QueueStore, k: AeKeys) -> None:
    await store.insert(k, QUEUE_MANAGER, [request()], 10**6)  # the connection opened
    requests = [request() for _ in range(CALLS)]
    calls = [asyncio.ensure_future(store.insert(k, QUEUE_MANAGER, [r], 10**6)) for r in requests]
    await asyncio.sleep(0)  # each call made, waiting for its reply
    for call in calls[::3]:
        call.cancel()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    for i, (r, outcome) in enumerate(zip(requests, outcomes, strict=True)):
        if i % 3:
            assert outcome == [r.id]
    # The cancelled calls were sent all the same: cancelling a call does not take back what it asked of Redis.
    assert await store.redis.hlen(k.req) == 1 + CALLS
    last = request()
    assert await store.insert(k, QUEUE_MANAGER, [last], 10**6) == [last.id]


async def test_an_error_reply_is_raised_as_redis_py_raises_it(store: QueueStore) -> None:
    with pytest.raises(ResponseError):
        # Built by hand, past its specification, which would refuse it before Redis sees it.
        await store.scripts.call(ScriptCall("insert", ["{x}:a"], ["not", "what", "insert", "takes", "at all"]))


async def test_a_killed_connection_is_opened_again(store: QueueStore, k: AeKeys) -> None:
    await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    [client] = await _pipelined_clients(store.redis)
    await store.redis.execute_command("CLIENT", "KILL", "ID", client["id"])
    # A call on the dead connection goes redis-py's way; the next one opens a new pipelined connection.
    for _ in range(2):
        await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    await eventually(lambda: _one_new_client(store.redis, client["id"]), 10, what="a new pipelined connection")
    assert await store.redis.hlen(k.req) == 3


async def _one_new_client(redis: Redis, killed: str) -> bool:
    clients = await _pipelined_clients(redis)
    return len(clients) == 1 and clients[0]["id"] != killed


def test_only_plain_connections_with_decoded_replies_are_pipelined() -> None:
    assert ScriptPipeline.of(Redis.from_url("redis://127.0.0.1:6379/2", decode_responses=True)) is not None
    assert ScriptPipeline.of(Redis.from_url("unix:///tmp/redis.sock", decode_responses=True)) is not None
    assert ScriptPipeline.of(Redis.from_url("redis://127.0.0.1:6379/0")) is None  # bytes replies
    assert ScriptPipeline.of(Redis.from_url("rediss://127.0.0.1:6379/0", decode_responses=True)) is None  # TLS
    assert ScriptPipeline.of(Redis.from_url("redis://127.0.0.1:6379/0?protocol=3", decode_responses=True)) is None


async def test_a_connection_that_answers_nothing_is_given_up_and_its_call_goes_redis_py_s_way(
    store: QueueStore, k: AeKeys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "REPLY_TIMEOUT_S", 0.2)
    await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    [silent] = await _pipelined_clients(store.redis)
    # Redis holds every client's commands for 3 s: far longer than the watchdog's 0.2 to 0.4 s.
    await store.redis.execute_command("CLIENT", "PAUSE", 3000, "ALL")
    late = request()
    assert await store.insert(k, QUEUE_MANAGER, [late], CONFIG.backlog_limit) == [late.id]
    # The call held on the given-up connection never ran: the request is queued once.
    assert await store.redis.hlen(k.req) == 2
    assert silent["id"] not in [client["id"] for client in await _pipelined_clients(store.redis)]


async def test_confirmed_calls_of_one_turn_share_one_wait_after_them_all(store: QueueStore, k: AeKeys) -> None:
    """A WAIT holds its connection until it is answered, so the inserts a replica must confirm go out with one WAIT
    after all of them per turn (it confirms every write before it): one WAIT each would run them one at a time.
    Each caller gets its own script's reply and the WAIT's (0 here: this Redis has no replica, and waits 50 ms)."""
    keys = [k.req, k.swept, k.servers, k.inflight, k.depth, k.desired, k.performance, k.dead_at, k.leases, k.histograms, k.promotion]
    figures = specs.QUEUE_FIGURES(keys, key_groups=[[]], arg_groups=[[]])  # no class
    await store.scripts.run(figures)  # the script loaded
    await store.scripts.call_and_wait(figures, 50)  # the connection opened
    before = await _waits(store.redis)
    replies = await asyncio.gather(*(store.scripts.call_and_wait(figures, 50) for _ in range(5)))
    assert all(reply is not None and reply[0][0] == 0 and reply[1] == 0 for reply in replies), replies
    assert await _waits(store.redis) == before + 1


async def _waits(redis: Redis) -> int:
    """The WAITs this Redis has run."""
    return int((await redis.info("commandstats")).get("cmdstat_wait", {}).get("calls", 0))


async def test_while_a_wait_is_out_the_calls_written_meanwhile_share_the_next(store: QueueStore, k: AeKeys) -> None:
    """Redis runs nothing after a WAIT on its connection until the WAIT is answered: with a WAIT per turn, a stalled
    replica would hold each queued turn for the whole timeout in turn. Calls of later turns, written while a WAIT
    is out, share one WAIT written once it is answered."""
    keys = [k.req, k.swept, k.servers, k.inflight, k.depth, k.desired, k.performance, k.dead_at, k.leases, k.histograms, k.promotion]
    figures = specs.QUEUE_FIGURES(keys, key_groups=[[]], arg_groups=[[]])  # no class
    await store.scripts.run(figures)  # the script loaded
    await store.scripts.call_and_wait(figures, 50)  # the connection opened
    before = await _waits(store.redis)
    first = asyncio.ensure_future(store.scripts.call_and_wait(figures, 300))  # no replica: 300 ms
    confirmed = store.scripts._confirmed
    assert confirmed is not None
    await eventually(lambda: confirmed._protocol is not None and confirmed._protocol.confirming is not None, what="the first WAIT out")
    later = []
    for _ in range(3):  # three turns while it is out
        later.append(asyncio.ensure_future(store.scripts.call_and_wait(figures, 300)))
        await asyncio.sleep(0)
    replies = await asyncio.gather(first, *later)
    assert all(reply is not None and reply[1] == 0 for reply in replies)
    assert await _waits(store.redis) == before + 2
