"""A lean HTTP/1.1 client for the load generators: keep-alive connections over asyncio streams, JSON bodies,
responses with a Content-Length (what the service sends). The load generator shares the machine's cores with
the service, so every microsecond it spends is one the service does not get; a general-purpose client spends
several times more per request than this one."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

import orjson


class HttpError(Exception):
    pass


# The service (uvicorn) closes a connection idle for 5 s; one idle longer than this is not reused, so a request is
# never sent on a connection the server is closing (and never needs a retry that could insert twice).
MAX_IDLE_SECONDS = 3.0
# A request the service has not answered this long after it was sent fails, named: waiting on, a benchmark hung until
# its caller's own timeout took it, saying nothing of which request (seen once: the `ab` smoke run, after 280 s).
# Far above any request a benchmark makes (long polls wait at most a second).
REQUEST_DEADLINE_SECONDS = 60.0
# How often the client looks for requests past their deadline: a look per client, not a timer per request.
DEADLINE_LOOK_SECONDS = 1.0
TIMING_HEADER = b"x-wlm-timing"  # app/web/timing.py


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.idle_since = time.monotonic()
        self.sent_at = 0.0
        self.past_deadline = False  # closed by HttpClient's look for requests past their deadline

    async def exchange(self, head: bytes, body: bytes) -> tuple[int, bytes, str | None]:
        """The status, the body and the service's timing header (WLM_TIMING_HEADER), if it sent one."""
        self.writer.write(head + body)
        status_line = await self.reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length, timing = 0, None
        while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.partition(b":")
            name = name.lower()
            if name == b"content-length":
                length = int(value)
            elif name == TIMING_HEADER:
                timing = value.strip().decode()
            elif name == b"transfer-encoding":
                raise HttpError("chunked responses are not supported")
        return status, await self.reader.readexactly(length) if length else b"", timing


class HttpClient:
    """Requests to one base URL with one bearer key; each request takes an idle connection or opens one, so
    concurrent coroutines each get their own. A request not answered within `deadline_s` raises HttpError."""

    def __init__(self, url: str, key: str, deadline_s: float = REQUEST_DEADLINE_SECONDS) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._auth = f"Authorization: Bearer {key}\r\n".encode()
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self.deadline_s = deadline_s
        self._deadlines: asyncio.Task[None] | None = None

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
        status, answer, _ = await self.timed_request(method, path, body, content_type)
        return status, answer

    async def timed_request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any, str | None]:
        """`request`, and the service's timing header (app/web/timing.py) if it sent one."""
        payload = b"" if body is None else body.encode() if isinstance(body, str) else orjson.dumps(body)
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n".encode()
            + self._auth
            + b"\r\n"
        )
        connection = await self._connection()
        if self._deadlines is None:
            self._deadlines = asyncio.get_running_loop().create_task(self._close_past_deadline())
        connection.sent_at = time.monotonic()
        self._busy.add(connection)
        try:
            status, raw, timing = await connection.exchange(head, payload)
        except BaseException as error:
            connection.writer.close()
            if connection.past_deadline and isinstance(error, Exception):  # a cancellation stays one
                raise HttpError(f"{method} {path}: no answer within {self.deadline_s:g} s") from error
            raise
        finally:
            self._busy.discard(connection)
        if connection.past_deadline:
            connection.writer.close()  # answered as its deadline closed it: not reused
        else:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        return status, orjson.loads(raw) if raw else None, timing

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if time.monotonic() - connection.idle_since < MAX_IDLE_SECONDS:
                return connection
            connection.writer.close()
        return _Connection(*await asyncio.open_connection(self.host, self.port))

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        return await self.request("POST", path, body)

    async def _close_past_deadline(self) -> None:
        """Close each connection whose request is past its deadline: its read ends, and the request fails, named."""
        while True:
            await asyncio.sleep(min(DEADLINE_LOOK_SECONDS, self.deadline_s))
            now = time.monotonic()
            for connection in [c for c in self._busy if now - c.sent_at > self.deadline_s]:
                connection.past_deadline = True
                connection.writer.transport.abort()

    async def close(self) -> None:
        if self._deadlines is not None:
            self._deadlines.cancel()
            self._deadlines = None
        for connection in self._idle:
            connection.writer.close()
        self._idle.clear()
