"""How scripts are sent: packed by app/queues/scripts.py byte for byte as redis-py packs them, loaded when Redis does
not know them (after a restart or SCRIPT FLUSH), and sent the general way for what the packer does not take."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection

from app.queues.keys import AeKeys
from app.queues.pipeline import bulk
from app.queues.scripts import _pack
from app.queues.store import QueueStore
from tests.queues.conftest import CONFIG, QUEUE_MANAGER, request


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


async def test_a_script_redis_forgot_is_loaded_again(store: QueueStore, k: AeKeys) -> None:
    (first,) = await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    await store.redis.script_flush()
    (second,) = await store.insert(k, QUEUE_MANAGER, [request()], CONFIG.backlog_limit)
    assert first != second and await store.redis.hlen(k.req) == 2
