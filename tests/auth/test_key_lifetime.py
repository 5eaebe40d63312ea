"""A key ends when it expires or is revoked, and a principal's change applies, on every replica, however warm its
cache: the cache's TTL here is far longer than any test, so only the expiry check on every call and the announced
changes can explain a refusal."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from app.auth import service
from app.auth.service import hash_key
from app.config import Settings
from app.queues.keys import key_changes_channel
from tests.conftest import ADMIN, bearer, make_key
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio

CACHE_SECONDS = 300.0


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"auth_cache_seconds": CACHE_SECONDS})


async def both_listening(redis_admin: Redis, settings: Settings) -> None:
    """Until both replicas hear announcements: what a test sees after is their effect, not the forgetting that
    comes with subscribing."""
    channel = key_changes_channel(settings.redis_prefix)

    async def subscribed() -> bool:
        return dict(await redis_admin.pubsub_numsub(channel))[channel] == 2

    await eventually(subscribed)


def cached(app: FastAPI, headers: dict[str, str]) -> bool:
    key = headers["Authorization"].removeprefix("Bearer ")
    return app.state.wlm.key_cache.verified.get(hash_key(key)) is not None


async def answers(http: httpx.AsyncClient, headers: dict[str, str], status: int, code: str | None = None, path: str = "/v1/whoami") -> bool:
    response = await http.get(path, headers=headers)
    return response.status_code == status and (code is None or response.json()["error"]["code"] == code)


async def test_a_cached_key_is_refused_from_the_instant_it_expires(client, app, monkeypatch):
    await client.post("/v1/principals", headers=ADMIN, json={"name": "shortlived", "roles": ["viewer"]})
    expires_at = datetime.now(UTC) + timedelta(minutes=10)
    created = await client.post("/v1/api-keys", headers=ADMIN, json={"principal": "shortlived", "expires_at": expires_at.isoformat()})
    headers = bearer(created.json()["key"])
    assert await answers(client, headers, 200) and cached(app, headers)
    monkeypatch.setattr(service, "utcnow", lambda: expires_at - timedelta(seconds=1))
    assert await answers(client, headers, 200)
    monkeypatch.setattr(service, "utcnow", lambda: expires_at)
    assert await answers(client, headers, 401, "expired_api_key")
    assert await answers(client, ADMIN, 200)  # a key without an expiry is not affected


async def test_a_key_revoked_on_one_replica_is_refused_by_another_at_once(client, other_app, other, settings, redis_admin):
    await both_listening(redis_admin, settings)
    headers = await make_key(client, "temp", ["viewer"])
    me = await other.get("/v1/whoami", headers=headers)
    assert me.status_code == 200 and cached(other_app, headers)
    assert (await client.delete(f"/v1/api-keys/{me.json()['key_id']}", headers=ADMIN)).status_code == 200
    await eventually(lambda: answers(other, headers, 401, "invalid_api_key"))


async def test_a_role_taken_away_on_one_replica_is_refused_by_another_at_once(client, other_app, other, settings, redis_admin):
    await both_listening(redis_admin, settings)
    headers = await make_key(client, "shrink", ["admin"])
    assert await answers(other, headers, 200, path="/v1/audit") and cached(other_app, headers)
    assert (await client.patch("/v1/principals/shrink", headers=ADMIN, json={"roles": ["viewer"]})).status_code == 200
    await eventually(lambda: answers(other, headers, 403, "missing_role", path="/v1/audit"))


async def test_changes_are_heard_again_after_the_subscription_was_cut(client, other_app, other, settings, redis_admin, caplog):
    def warnings() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "app.redis.broadcast" and "API key changes" in r.getMessage()]

    await both_listening(redis_admin, settings)
    headers = await make_key(client, "cut", ["viewer"])
    assert await answers(other, headers, 200) and cached(other_app, headers)
    await redis_admin.client_kill_filter(_type="pubsub")
    # Logged once the cut connection is closed: the subscription after it is the one that lasts.
    assert all(r.levelname == "WARNING" and not r.exc_info for r in await eventually(warnings))  # a line, not a traceback
    await both_listening(redis_admin, settings)
    # What was announced while it was cut off is lost to it: back, it forgets what it verified before.
    await eventually(lambda: not cached(other_app, headers))
    me = await other.get("/v1/whoami", headers=headers)
    assert me.status_code == 200 and cached(other_app, headers)
    assert (await client.delete(f"/v1/api-keys/{me.json()['key_id']}", headers=ADMIN)).status_code == 200
    await eventually(lambda: answers(other, headers, 401, "invalid_api_key"))


async def test_a_revoke_stands_when_it_cannot_be_announced(client, app, monkeypatch):
    headers = await make_key(client, "quiet", ["viewer"])
    me = await client.get("/v1/whoami", headers=headers)

    async def unreachable(*_: object) -> None:
        raise RedisConnectionError("Redis is down")

    monkeypatch.setattr(app.state.wlm.redis, "publish", unreachable)
    assert (await client.delete(f"/v1/api-keys/{me.json()['key_id']}", headers=ADMIN)).status_code == 200
    assert await answers(client, headers, 401, "invalid_api_key")  # this replica forgot it at once all the same
