"""How scripts are sent: packed by app/redis/scripts.py byte for byte as redis-py packs them, loaded when Redis does
not know them (after a restart or SCRIPT FLUSH), and sent the general way for what the packer does not take."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.connection import Connection

from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs
from app.redis.pipeline import bulk
from app.redis.scripts import MAX_PACKED_KEYS, _pack
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, SERVER, request

BATCH = 200


@pytest.mark.parametrize(
    "args",
    [
        [],
        [7, 0, -12, 30_000],
        ["ONLINE", "é ü 漢字", "", "a\r\nb"],
        [b"\x00\xff", 1.5, 1e-7, 10**20],
    ],
)
def test_a_script_call_is_packed_as_redis_py_packs_it(args: list[Any]) -> None:
    keys = ["{wlm:LOCAL:PAYROLL}:req", "{wlm:LOCAL:PAYROLL}:q:ONLINE:dep", "{wlm:LOCAL:ÄE}:x"]
    sha = "0123456789abcdef0123456789abcdef01234567"
    expected = b"".join(Connection().pack_command("EVALSHA", sha, len(keys), *keys, *args))
    assert _pack(b"$7\r\nEVALSHA\r\n" + bulk(sha.encode()), keys, args) == expected


def test_what_the_packer_does_not_take_is_refused_for_the_general_way() -> None:
    with pytest.raises(TypeError):
        _pack(b"", [], [True])


def test_keys_packed_again_from_the_cache_and_past_its_bound_are_packed_alike() -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    evalsha = b"$7\r\nEVALSHA\r\n" + bulk(sha.encode())
    fixed = ["{wlm:LOCAL:PAYROLL}:req", "{wlm:LOCAL:ÄE}:x"]
    redis_py = Connection()  # its packer, as redis-py writes a command (a connection costs ~1.4 ms to make)
    for n in range(MAX_PACKED_KEYS + 10):  # each call names a key of its own beside the same two
        keys = [*fixed, f"{{wlm:LOCAL:PAYROLL}}:idem:{n}"]
        expected = b"".join(redis_py.pack_command("EVALSHA", sha, len(keys), *keys, n))
        assert _pack(evalsha, keys, [n]) == expected
    with pytest.raises(TypeError):
        _pack(evalsha, [*fixed, True], [])  # type: ignore[list-item]  # a key the packer does not take


async def test_a_script_redis_forgot_is_loaded_again(store: QueueStore, k: AeKeys) -> None:
    (first,) = await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    await store.redis.script_flush()
    (second,) = await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    assert first != second and await store.redis.hlen(k.req) == 2


async def _commands_run(redis: Redis) -> int:
    return sum(
        int(stats["calls"]) for name, stats in (await redis.info("commandstats")).items() if name not in ("cmdstat_config", "cmdstat_info")
    )


async def test_a_batch_costs_redis_a_few_commands_not_several_per_request(store: QueueStore, k: AeKeys) -> None:
    """The scripts gather a batch's writes into one command per key: the insert, the select that begins and the
    select that ends 200 requests each run a few dozen commands (they ran 9, 8 and 8 per request)."""
    await store.register_server(k, SERVER, worker_tasks=BATCH, worker_weight=1, overflow=False)
    runs = []
    await store.redis.config_resetstat()
    await store.insert(k, QUEUE_MANAGER, [request() for _ in range(BATCH)], 10**6)
    runs.append(await _commands_run(store.redis))
    await store.redis.config_resetstat()
    selected = await store.select(k, CONFIG, SERVER, BATCH, begin=True)
    runs.append(await _commands_run(store.redis))
    await store.redis.config_resetstat()
    ended = await store.select(k, CONFIG, SERVER, 1, begin=True, ends=[EndArgs(item.id, "completed", None) for item in selected.items])
    runs.append(await _commands_run(store.redis))
    assert len(selected.items) == BATCH and [r.code for r in ended.ended] == [ReturnCode.OK] * BATCH
    assert all(run < 60 for run in runs), runs
    assert await store.redis.llen(k.records) == BATCH and await store.redis.hlen(k.payload) == 0


async def test_a_request_ended_twice_in_one_call_is_ended_once(store: QueueStore, k: AeKeys) -> None:
    await store.register_server(k, SERVER, worker_tasks=1, worker_weight=1, overflow=False)
    await store.insert(k, QUEUE_MANAGER, [request()], 10)
    [item] = (await store.select(k, CONFIG, SERVER, 1, begin=True)).items
    result = await store.select(
        k, CONFIG, SERVER, 1, begin=True, ends=[EndArgs(item.id, "completed", None), EndArgs(item.id, "failed", None)]
    )
    assert [(r.code, r.value if r.code is not ReturnCode.OK else r.record["outcome"]) for r in result.ended] == [
        (ReturnCode.OK, "completed"),
        (ReturnCode.ALREADY_ENDED, "completed"),
    ]
    assert await store.redis.llen(k.records) == 1
