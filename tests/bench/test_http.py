"""bench/_http.py's client against a real socket server that never answers, or answers late."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bench._http import HttpClient, HttpError

pytestmark = pytest.mark.asyncio
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[float | None]]]:
    """A server that reads each request and answers after the delay the next entry of its list gives (None: never,
    until the client closes the connection)."""
    delays: list[float | None] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                delay = delays.pop(0)
                if delay is None:
                    await reader.read()
                    return
                await asyncio.sleep(delay)
                writer.write(ANSWER)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed its connection
        finally:
            writer.close()

    listening = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", delays
    listening.close()
    await listening.wait_closed()


@pytest.fixture
async def clients() -> AsyncIterator[list[HttpClient]]:
    """The test's clients, closed after it however it ends (the tests share one event loop)."""
    made: list[HttpClient] = []
    yield made
    for client in made:
        await client.close()
        assert client._deadlines is None


async def test_a_request_never_answered_fails_named_after_its_deadline(server, clients):
    url, delays = server
    client = HttpClient(url, "key", deadline_s=0.2)
    clients.append(client)
    delays += [0, None, 0]
    assert await client.request("GET", "/first") == (200, {})
    with pytest.raises(HttpError, match=r"POST /v1/work: no answer within 0.2 s"):
        await client.post("/v1/work", {"n": 1})
    assert not client._idle  # the connection closed at the deadline is not reused
    assert await client.request("GET", "/after") == (200, {})


async def test_an_answer_within_the_deadline_is_taken_and_its_connection_kept(server, clients):
    url, delays = server
    client = HttpClient(url, "key", deadline_s=5)
    clients.append(client)
    delays += [0.05, 0]
    assert await client.request("GET", "/slow") == (200, {})
    assert await client.request("GET", "/again") == (200, {})
    assert len(client._idle) == 1  # one connection, reused
