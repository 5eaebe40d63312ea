"""The settings' counter (app/shared/generation.py): a process at rest reads one number, not the cached tables, and
another replica's change of each kind is still seen within the cache's time; on the real databases and app."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.connections.queue_managers import ConnectedQueueManagers
from app.db import create_engine, session_factory, utcnow
from app.operator.service import OperatorStore
from app.policy.models import PolicyVersion
from app.policy.service import PolicyStore, digest_of, parse_definition
from app.queues.store import QueueStore
from app.routing.service import RoutingStore
from app.shared.generation import GatedValue, Generations, count_change
from tests.conftest import ADMIN, EXAMPLE_POLICY, install_policy, make_key
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def sessions(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return session_factory(engine)


def statements_of(engine: AsyncEngine) -> list[str]:
    """Every SQL statement `engine` runs from now on, as run."""
    seen: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda _c, _cur, statement, *_: seen.append(statement))
    return seen


async def changed(sessions: async_sessionmaker[AsyncSession]) -> None:
    """A change counted as another replica's would be."""
    async with sessions() as session:
        await count_change(session)
        await session.commit()


async def test_a_value_is_read_again_only_once_the_counter_moved(sessions):
    # No cache time: the counter is read at every call, so nothing here waits for a time to pass.
    reads: list[object] = []

    async def load(_session: AsyncSession) -> object:
        reads.append(object())
        return reads[-1]

    value = GatedValue(Generations(sessions, 0), load)
    first = await value.get()
    assert await value.get() is first and len(reads) == 1
    await changed(sessions)
    assert await value.get() is not first and len(reads) == 2
    value.clear()  # a change made on this process: read again at once, whatever the counter says
    assert await value.get() is reads[2]


async def test_the_stores_at_rest_read_the_counter_only_and_keep_their_objects(engine, sessions, redis_context):
    """The policy, the operator states and the routing overrides, each looked at again and again, cost one read of the
    counter each time (the cache's time is 0 here, so each look is a read), not a read of their tables."""
    definition = parse_definition(yaml.safe_load(EXAMPLE_POLICY))
    async with sessions() as session:
        session.add(
            PolicyVersion(
                version=1,
                name=definition.name,
                digest=digest_of(definition),
                definition=definition.model_dump(mode="json", exclude_none=True),
                source="",
                installed_by="admin",
                installed_at=utcnow(),
            )
        )
        await count_change(session)
        await session.commit()
    generations = Generations(sessions, 0)
    queues = QueueStore(redis_context.redis, redis_context.prefix, idempotency_ttl_s=60, tombstone_ms=1000, samples_ms=1000)
    policies, operator = PolicyStore(generations, ConnectedQueueManagers()), OperatorStore(generations)
    routing = RoutingStore(generations, queues)

    async def look() -> tuple[Any, ...]:
        return await policies.active(), await operator.states(), await routing.overrides()

    first = await look()
    assert first[0].version == 1
    statements = statements_of(engine)
    for _ in range(3):
        assert all(now is before for now, before in zip(await look(), first, strict=True))
    read = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(read) == 9 and all("settings_generation" in s for s in read), read


# --------------------------------------------------------------------------------------------------------------------
# Another replica (another app on the same database and Redis), its caches warm
# --------------------------------------------------------------------------------------------------------------------

QUEUE_MANAGER = {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}
DYNAMIC = {"name": "dyn1", "server_limits": {"min": 0, "max": 4}, "completion_time_ms": 30_000}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # No duties: the manager loop would move a QUIESCING environment on by itself; a short cache keeps the waits short.
    return settings.model_copy(update={"background_duties": False, "policy_cache_seconds": 0.3})


async def seen(client: httpx.AsyncClient, path: str, **params: Any) -> Any:
    response = await client.get(path, headers=ADMIN, params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_another_replica_sees_each_kind_of_change_within_the_cache_time(client, other):
    await install_policy(client)
    state = lambda: seen(other, "/v1/application-environments/PAYROLL")  # noqa: E731
    weight = lambda: seen(other, "/v1/routing/nodes")  # noqa: E731
    assert (await state())["state"] == "AVAILABLE" and (await weight())["items"][0]["weight"] != 7

    vary = await client.post("/v1/operator/commands", headers=ADMIN, json={"command": "VARY WLM,APPLENV=PAYROLL,QUIESCE"})
    assert vary.status_code == 200, vary.text
    await eventually(lambda: _equal(state(), "state", "QUIESCING"), what="the other replica's state of PAYROLL")

    assert (await client.patch("/v1/routing/nodes/LOCAL", headers=ADMIN, json={"weight": 7})).status_code == 200
    await eventually(lambda: _first_node(weight(), "weight", 7), what="the other replica's weight of LOCAL")

    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"].append({"name": "EXTRA", "subsystem_type": "CB"})
    await install_policy(client, json.dumps(document), "application/json")
    await eventually(lambda: _found(other, "/v1/application-environments/EXTRA"), what="the other replica's EXTRA")


async def test_another_replica_sees_a_dynamic_environment_come_and_go(client, other):
    await install_policy(client)
    qm = await make_key(client, "qm", ["queue_manager"])
    connected = await client.post("/v1/connections", headers=qm, json=QUEUE_MANAGER)
    assert connected.status_code == 201, connected.text
    token = connected.json()["token"]
    listed = lambda: seen(other, "/v1/application-environments", dynamic=True)  # noqa: E731
    assert (await listed())["items"] == []
    defined = await client.post("/v1/application-environments", headers=qm, json={"connect_token": token, **DYNAMIC})
    assert defined.status_code == 201, defined.text
    await eventually(lambda: _names(listed(), ["DYN1"]), what="DYN1 on the other replica")
    assert (await client.delete(f"/v1/connections/{token}", headers=qm)).status_code == 200
    await eventually(lambda: _names(listed(), []), what="DYN1 gone from the other replica")


async def _equal(answer: Any, key: str, expected: Any) -> bool:
    return (await answer)[key] == expected  # type: ignore[no-any-return]


async def _found(client: httpx.AsyncClient, path: str) -> bool:
    return (await client.get(path, headers=ADMIN)).status_code == 200


async def _first_node(answer: Any, key: str, expected: Any) -> bool:
    return (await answer)["items"][0][key] == expected  # type: ignore[no-any-return]


async def _names(answer: Any, expected: list[str]) -> bool:
    return [item["name"] for item in (await answer)["items"]] == expected
