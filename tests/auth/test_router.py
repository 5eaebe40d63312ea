"""API keys, principals and roles over HTTP, on real databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.auth.service import ensure_bootstrap_admin, hash_key
from app.db import create_engine, session_factory
from tests.conftest import ADMIN, bearer, make_key

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, "missing_api_key"),
        ({"Authorization": "Bearer "}, "missing_api_key"),
        ({"Authorization": "Basic YWRtaW46YWRtaW4="}, "missing_api_key"),
        ({"Authorization": "Bearer wlm_not-a-real-key"}, "invalid_api_key"),
    ],
    ids=["none", "empty", "basic", "wrong"],
)
async def test_requests_without_a_valid_key_are_401(client, headers, code):
    for method, path in (("GET", "/v1/policy"), ("POST", "/v1/connections"), ("GET", "/v1/audit"), ("GET", "/v1/whoami")):
        response = await client.request(method, path, headers=headers, json={})
        assert response.status_code == 401, (path, response.text)
        assert response.json()["error"]["code"] == code
        assert response.headers["www-authenticate"] == "Bearer"


async def test_health_and_metrics_need_no_key(client):
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await client.get(path)).status_code == 200


async def test_whoami_and_role_implication(client):
    me = (await client.get("/v1/whoami", headers=ADMIN)).json()
    assert me["principal"] == "admin" and set(me["roles"]) == {"admin", "operator", "viewer"}
    operator = await make_key(client, "op1", ["operator"])
    assert set((await client.get("/v1/whoami", headers=operator)).json()["roles"]) == {"operator", "viewer"}


async def test_keys_are_stored_hashed_and_shown_once(client, app):
    created = (await client.post("/v1/principals", headers=ADMIN, json={"name": "svc", "roles": ["server"], "permits": ["CB.**"]})).json()
    assert created["permits"] == ["CB.**"]
    response = await client.post("/v1/api-keys", headers=ADMIN, json={"principal": "svc", "description": "payroll"})
    assert response.status_code == 201
    key = response.json()["key"]
    listed = (await client.get("/v1/api-keys", headers=ADMIN, params={"principal": "svc"})).json()["items"]
    assert len(listed) == 1 and "key" not in listed[0] and listed[0]["description"] == "payroll"
    async with app.state.wlm.sessions() as session:
        from app.auth.models import ApiKey

        stored = await session.get(ApiKey, listed[0]["id"])
        assert stored is not None and stored.key_hash == hash_key(key) and key not in stored.key_hash


async def test_revoked_key_stops_working(client):
    headers = await make_key(client, "temp", ["viewer"])
    assert (await client.get("/v1/whoami", headers=headers)).status_code == 200
    key_id = (await client.get("/v1/whoami", headers=headers)).json()["key_id"]
    revoked = await client.delete(f"/v1/api-keys/{key_id}", headers=ADMIN)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    response = await client.get("/v1/whoami", headers=headers)
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"


async def test_expired_key_is_refused(client, app):
    await client.post("/v1/principals", headers=ADMIN, json={"name": "shortlived", "roles": ["viewer"]})
    soon = datetime.now(UTC) + timedelta(seconds=1)
    response = await client.post("/v1/api-keys", headers=ADMIN, json={"principal": "shortlived", "expires_at": soon.isoformat()})
    assert response.status_code == 201
    async with app.state.wlm.sessions() as session:
        from app.auth.models import ApiKey

        stored = await session.get(ApiKey, response.json()["id"])
        stored.expires_at = datetime.now(UTC) - timedelta(seconds=1)
        await session.commit()
    result = await client.get("/v1/whoami", headers=bearer(response.json()["key"]))
    assert result.status_code == 401 and result.json()["error"]["code"] == "expired_api_key"


@pytest.mark.parametrize(
    ("body", "status", "path_or_code"),
    [
        ({"name": "x", "roles": ["superuser"]}, 422, "roles[0]"),
        ({"name": "x", "roles": []}, 422, "roles"),
        ({"name": "bad name!", "roles": ["viewer"]}, 422, "name"),
        ({"name": "x", "roles": ["server"], "permits": ["CB..X"]}, 422, "permits[0]"),
        ({"name": "x", "roles": ["viewer"], "extra": 1}, 422, "extra"),
    ],
)
async def test_bad_principals(client, body, status, path_or_code):
    response = await client.post("/v1/principals", headers=ADMIN, json=body)
    assert response.status_code == status
    assert path_or_code in [e["path"] for e in response.json()["error"]["errors"]]


async def test_duplicate_principal_and_unknown_references(client):
    assert (await client.post("/v1/principals", headers=ADMIN, json={"name": "dup", "roles": ["viewer"]})).status_code == 201
    again = await client.post("/v1/principals", headers=ADMIN, json={"name": "dup", "roles": ["viewer"]})
    assert again.status_code == 409 and again.json()["error"]["code"] == "duplicate_principal"
    key = await client.post("/v1/api-keys", headers=ADMIN, json={"principal": "ghost"})
    assert key.status_code == 404 and key.json()["error"]["code"] == "unknown_principal"
    past = await client.post("/v1/api-keys", headers=ADMIN, json={"principal": "dup", "expires_at": "2000-01-01T00:00:00Z"})
    assert past.status_code == 422 and past.json()["error"]["errors"][0]["path"] == "expires_at"
    revoke = await client.delete("/v1/api-keys/k_nothing", headers=ADMIN)
    assert revoke.status_code == 404


async def test_non_admins_cannot_manage_keys(client):
    operator = await make_key(client, "op2", ["operator"])
    for method, path, body in (
        ("POST", "/v1/principals", {"name": "y", "roles": ["admin"]}),
        ("POST", "/v1/api-keys", {"principal": "admin"}),
        ("GET", "/v1/api-keys", None),
    ):
        response = await client.request(method, path, headers=operator, json=body)
        assert response.status_code == 403 and response.json()["error"]["code"] == "missing_role"


async def test_updating_roles_takes_effect(client):
    headers = await make_key(client, "grow", ["viewer"])
    assert (await client.get("/v1/audit", headers=headers)).status_code == 403
    patched = await client.patch("/v1/principals/grow", headers=ADMIN, json={"roles": ["admin"], "permits": ["CB.**"]})
    assert patched.status_code == 200 and patched.json()["permits"] == ["CB.**"]
    assert (await client.get("/v1/audit", headers=headers)).status_code == 200


async def test_bootstrap_admin_generated_once(database_url, tmp_path):
    engine = create_engine(database_url)
    sessions = session_factory(engine)
    try:
        key = await ensure_bootstrap_admin(sessions, None, tmp_path)
        assert key is not None and key.startswith("wlm_")
        assert (tmp_path / "admin.key").read_text().strip() == key
        assert oct((tmp_path / "admin.key").stat().st_mode & 0o777) == "0o600"
        assert await ensure_bootstrap_admin(sessions, None, tmp_path) is None  # an admin exists: nothing new
        configured = "wlm_configured-key-for-this-test-0123456789"
        assert await ensure_bootstrap_admin(sessions, configured, tmp_path) is None
        assert await ensure_bootstrap_admin(sessions, configured, tmp_path) is None
        from sqlalchemy import func, select

        from app.auth.models import ApiKey

        async with sessions() as session:
            assert await session.scalar(select(func.count()).select_from(ApiKey)) == 2
    finally:
        await engine.dispose()
