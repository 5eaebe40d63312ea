"""The hot path's Redis round trips: once its caches are warm, an insert is one script call, and so is a select that
ends what the server held and begins what it takes, whatever the number of requests. Counted on the calls' own
task (in-process requests run on the test's task), so the background duties' calls do not count."""

from __future__ import annotations

from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection

from app.redis.pipeline import _Protocol
from tests.work.conftest import ONLINE, World

_counting: ContextVar[list[str] | None] = ContextVar("counting", default=None)


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The commands this task sends to Redis, through redis-py or the scripts' pipelined connection, one entry per
    round trip (a pipeline is one)."""
    sent: list[str] = []
    send = AbstractConnection.send_packed_command

    async def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        trips = _counting.get()
        if trips is not None:
            packed = b"".join(bytes(part) for part in (command if isinstance(command, list) else [command]))
            trips.append(packed.split(b"\r\n")[2].decode())
        await send(self, command, check_health)

    pipelined = _Protocol.send

    def counted_pipelined(self: _Protocol, command: bytes) -> Any:
        trips = _counting.get()
        if trips is not None:
            trips.append(command.split(b"\r\n")[2].decode())
        return pipelined(self, command)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    monkeypatch.setattr(_Protocol, "send", counted_pipelined)
    token = _counting.set(sent)
    yield sent
    _counting.reset(token)


async def _warm(world: World, server: str) -> list[str]:
    """Caches filled (key, connection, policy, operator state), both select scripts loaded; the server holds one request."""
    await world.select(server, expect=None, max_items=1, wait_seconds=0)  # the select script (without begin) loaded
    await world.insert({"n": 0})
    response = await world.select(server, max_items=1, begin=True)
    return [item["token"] for item in response.json()["items"]]


async def test_an_insert_and_a_select_that_ends_and_begins_are_one_round_trip_each(world: World, round_trips: list[str]) -> None:
    server = await world.server(tasks=4)
    held = await _warm(world, server)
    round_trips.clear()

    await world.insert({"n": 1})
    assert round_trips == ["EVALSHA"]
    round_trips.clear()

    response = await world.select(server, max_items=1, begin=True, end=[{"token": t} for t in held])
    assert len(response.json()["ended"]) == 1 and len(response.json()["items"]) == 1
    assert round_trips == ["EVALSHA"]
    round_trips.clear()

    empty = await world.select(
        server, expect=None, max_items=1, wait_seconds=0, end=[{"token": i["token"]} for i in response.json()["items"]]
    )
    assert empty.status_code == 200 and empty.json()["items"] == []
    assert round_trips == ["EVALSHA"]  # nothing was ever swept here: no look at the database's blobs


async def test_a_batch_insert_and_a_select_of_many_are_one_round_trip_each(world: World, round_trips: list[str]) -> None:
    server = await world.server(tasks=200)
    held = await _warm(world, server)
    round_trips.clear()

    items = [{"classification": ONLINE, "payload": {"n": i}} for i in range(150)]
    response = await world.client.post(
        "/v1/work:batch", headers=world.qm, json={"connect_token": world.qm_token, "application_environment": "PAYROLL", "items": items}
    )
    assert response.status_code == 201, response.text
    assert round_trips == ["EVALSHA"]
    round_trips.clear()

    response = await world.select(server, max_items=150, begin=True, end=[{"token": t} for t in held])
    assert len(response.json()["items"]) == 150
    assert round_trips == ["EVALSHA"]
