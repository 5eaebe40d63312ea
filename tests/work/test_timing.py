"""The hot paths' timing header (app/web/timing.py): each phase's wall-clock time in the order it happened, with
WLM_TIMING_HEADER on; nothing without it."""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from app.config import Settings
from app.web.timing import HEADER
from tests.waiting import eventually
from tests.work.conftest import World


@pytest.fixture
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    return settings.model_copy(update={"timing_header": getattr(request, "param", True)})


def marks(response: httpx.Response) -> list[tuple[str, float]]:
    """The header's marks after the process's id (this process: the app runs in the tests' own)."""
    pid, *pairs = [pair.partition("=") for pair in response.headers[HEADER].split(",")]
    assert pid == ("pid", "=", str(os.getpid()))
    return [(name, float(value)) for name, _, value in pairs]


def in_order(timed: list[tuple[str, float]]) -> bool:
    return all(earlier[1] <= later[1] for earlier, later in zip(timed, timed[1:], strict=False))


async def test_an_insert_answer_carries_its_phases_in_order(world: World) -> None:
    response = await world.client.post(
        "/v1/work",
        headers=world.qm,
        json={"connect_token": world.qm_token, "application_environment": "PAYROLL", "classification": {"userid": "ATM01"}},
    )
    assert response.status_code == 201, response.text
    timed = marks(response)
    assert [name for name, _ in timed] == ["recv", "script_call", "script_reply", "respond"]
    assert in_order(timed)


async def test_a_woken_select_marks_its_wake_up(world: World, app: FastAPI, redis_admin: Redis) -> None:
    server = await world.server()
    poll = asyncio.create_task(world.select(server, wait_seconds=20))
    waiters = app.state.wlm.queues.keys("LOCAL", "PAYROLL").waiters

    async def listed() -> bool:
        return await redis_admin.zcard(waiters) == 1

    await eventually(listed, what="the select's waiter listed")
    inserted = await world.client.post(
        "/v1/work",
        headers=world.qm,
        json={"connect_token": world.qm_token, "application_environment": "PAYROLL", "classification": {"userid": "ATM01"}},
    )
    timed = marks(await asyncio.wait_for(poll, 10))
    names = [name for name, _ in timed]
    # The first attempt found nothing; the second, after the wake-up, took the request.
    assert names == ["recv", "script_call", "script_reply", "woken", "resumed", "script_call", "script_reply", "respond"]
    assert in_order(timed)
    assert dict(marks(inserted))["script_call"] <= timed[3][1]  # woken after the insert's script was sent


@pytest.mark.parametrize("settings", [False], indirect=True)
async def test_no_header_without_the_setting(world: World) -> None:
    server = await world.server()
    await world.insert({"n": 1})
    response = await world.select(server)
    assert HEADER not in response.headers
