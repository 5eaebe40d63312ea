"""Liveness, readiness and metrics on real Redis and databases."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from app.main import create_app
from app.migrate import downgrade

pytestmark = pytest.mark.asyncio


async def test_ready_when_redis_and_database_answer(client):
    response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"redis": "ok", "database": "ok"}}


async def test_not_ready_when_redis_is_unreachable(settings):
    settings.redis_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://wlm") as client:
            response = await client.get("/readyz")
            assert (await client.get("/healthz")).status_code == 200
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "not_ready" and error["checks"]["database"] == "ok" and error["checks"]["redis"] != "ok"


async def test_not_ready_when_schema_is_behind(settings, database_url):
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        await asyncio.to_thread(downgrade, database_url, "base")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://wlm") as client:
            response = await client.get("/readyz")
    assert response.status_code == 503 and "wlm db upgrade" in response.json()["error"]["checks"]["database"]


async def test_service_refuses_to_start_on_an_unmigrated_database(settings, database_url):
    await asyncio.to_thread(downgrade, database_url, "base")
    app = create_app(settings)
    with pytest.raises(RuntimeError, match="wlm db upgrade"):
        async with app.router.lifespan_context(app):
            pass


async def test_metrics_count_requests_by_route_template(client):
    await client.post("/v1/connections/c_abc/heartbeat")
    text = (await client.get("/metrics")).text
    assert 'wlm_http_requests_total{method="POST",route="/v1/connections/{token}/heartbeat",status="401"}' in text
    assert "wlm_http_request_duration_seconds_bucket" in text


async def test_unknown_routes_and_methods_use_the_error_body(client):
    missing = await client.get("/v1/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong_method = await client.delete("/v1/policy")
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "method_not_allowed"


async def test_openapi_documents_the_contract(client):
    spec = (await client.get("/openapi.json")).json()
    for path in ("/v1/policy", "/v1/connections", "/v1/connections/{token}/heartbeat", "/v1/api-keys", "/readyz", "/metrics"):
        assert path in spec["paths"], path
    body = spec["paths"]["/v1/policy"]["put"]["requestBody"]["content"]
    assert set(body) == {"application/yaml", "application/json"}
    assert "ServiceDefinition" in spec["components"]["schemas"] and "ErrorBody" in spec["components"]["schemas"]
    assert (await client.get("/docs")).status_code == 200
