"""A Redis connection closed under a write, as redis-py 8.1 reports it (AttributeError from the write, not
ConnectionError), is a Redis outage: 503 with Retry-After, not 500 (app/errors.py, closed_while_writing)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio.connection import Connection

from app.errors import closed_while_writing, install_error_handlers, unavailable, unavailable_dependency


async def _closed_write() -> AttributeError:
    """What a write on a connection another call closed raises: redis-py's own write, on a connection with no writer."""
    with pytest.raises(AttributeError) as raised:
        await Connection(host="127.0.0.1", port=1)._send_packed_command([b"*1\r\n$4\r\nPING\r\n"])
    return raised.value


async def test_a_write_on_a_closed_connection_is_told_from_a_mistake() -> None:
    closed = await _closed_write()
    assert closed_while_writing(closed) and unavailable(closed) and unavailable_dependency(closed) == "redis"
    writer = None
    try:
        writer.writelines([b""])  # type: ignore[attr-defined]  # the same error, raised by the caller's own code
    except AttributeError as mistake:
        assert not closed_while_writing(mistake) and not unavailable(mistake)
    assert not closed_while_writing(ValueError("not a write"))


async def test_it_is_answered_503_not_500() -> None:
    app = FastAPI()
    install_error_handlers(app)
    closed = await _closed_write()

    @app.get("/write")
    async def write() -> None:
        raise closed

    @app.get("/mistake")
    async def mistake() -> None:
        raise AttributeError("a bug")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://wlm") as client:
        answer = await client.get("/write")
        assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
        assert answer.json()["error"]["code"] == "redis_unavailable"
        assert (await client.get("/mistake")).status_code == 500


async def test_a_method_not_allowed_names_every_method_of_its_path(client: httpx.AsyncClient) -> None:
    """A path's operations are routes of their own: the 405 names them all, not those of the first route matched."""
    for method, path, allowed in (
        ("OPTIONS", "/v1/connections", "GET, POST"),
        ("PUT", "/v1/principals/someone", "GET, PATCH"),
        # A literal segment beside a parameter's: not taken for the run's id (a 422), but a method it lacks.
        ("DELETE", "/v1/reports/what-if/dates", "GET"),
        # The most specific path of the document: not also /v1/work/{token}'s or /v1/dead-letters/{token}'s methods.
        ("OPTIONS", "/v1/work/select", "POST"),
        ("OPTIONS", "/v1/dead-letters/7:retry", "POST"),
    ):
        response = await client.request(method, path)
        assert (response.status_code, response.headers["allow"]) == (405, allowed), (method, path, response.text)
        assert response.json()["error"]["code"] == "method_not_allowed"
