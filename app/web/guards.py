"""Guards at the HTTP edge, before routing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import BadRequest, PayloadTooLarge, error_response
from app.web import timing


class RejectNulMiddleware:
    """NUL characters in paths or query strings are refused with 400: they are never meaningful here, and
    PostgreSQL cannot store or compare text that contains them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ("\x00" in scope["path"] or b"%00" in scope["query_string"].lower()):
            refusal = BadRequest("NUL characters are not allowed in the URL", code="invalid_characters")
            await error_response(refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """A request body larger than its route allows (`limits` by method and path, else `default`) is refused with 413
    before anything reads it: at once from Content-Length, else as soon as the bytes streamed pass the limit. It runs
    before authentication and parsing, so no caller, with a key or without, makes the process hold more of a body
    than its route's limit."""

    def __init__(self, app: ASGIApp, limits: Mapping[tuple[str, str], int], default: int) -> None:
        self.app = app
        self.limits = limits
        self.default = default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.get((scope["method"], scope["path"]), self.default)
        declared, chunked = _framing(scope)
        if declared is not None and declared > limit:
            await _BoundedBody(scope, receive, send, limit, chunked).refuse()
            return
        if declared is not None and not chunked and scope.get("http_version") in _FRAMED_VERSIONS:
            # HTTP/1's parser frames a body by the length it declares: it cannot outgrow it, so nothing need watch it.
            await self.app(scope, receive, send)
            return
        body = _BoundedBody(scope, receive, send, limit, chunked)
        try:
            await self.app(scope, body.receive, body.send)
        except PayloadTooLarge:
            if not body.refused:
                raise


class _BoundedBody:
    """One request's body as the application reads it, refused once it passes `limit`: a chunked body, or one whose
    length its headers do not state readably. The refusal closes the connection, as does any answer given before a
    chunked body's end (a caller refused before its body is read): kept open, it would have uvicorn read the rest,
    however long, only to discard it."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, limit: int, streaming: bool) -> None:
        self.scope = scope
        self._receive = receive
        self._send = send
        self.limit = limit
        self.streaming = streaming  # a chunked body, until it is read to its end
        self.received = 0
        self.started = self.refused = False

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            self.streaming = self.streaming and message.get("more_body", False)
        if self.received > self.limit:
            if not self.started:
                # Answered here, whoever is reading: FastAPI turns any error while it reads a body into a 400.
                await self.refuse()
            raise _too_large(self.limit)  # unwinds the reader; the answer it makes of it is dropped
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.started = True
            if self.streaming:
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
        await self._send(message)

    async def refuse(self) -> None:
        self.refused = True
        error = _too_large(self.limit)
        await error_response(error, {"connection": "close"})(self.scope, self._receive, self._send)


# The HTTP versions whose requests carry a body only as their Content-Length or chunked encoding say (HTTP/2's may
# stream without either).
_FRAMED_VERSIONS = ("1.0", "1.1")


def _framing(scope: Scope) -> tuple[int | None, bool]:
    """The body's Content-Length (0 without one; None where it cannot be read: httptools passes a trailing space on),
    and whether it is sent chunked instead."""
    length: int | None = 0
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            value = value.strip()
            length = int(value) if value.isdigit() else None
        elif name == b"transfer-encoding":
            chunked = True
    return length, chunked


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"request bodies on this route may have at most {limit} bytes", limit_bytes=limit)


@dataclass(frozen=True)
class HotPath:
    """A route whose requests skip the framework's request plumbing (body parsing, dependency solving, routing):
    the body is validated straight from its JSON bytes and the route's own endpoint is called with it and the
    route's one dependency. The route stays declared in FastAPI, which documents it and serves any request
    the fast path leaves to it (another content type, a query string)."""

    method: str
    path: str  # also the route label of the HTTP metrics
    body: type[BaseModel]
    dependency: Callable[[Request], Awaitable[Any]]
    endpoint: Callable[[Any, Any], Awaitable[Response]]


class HotPathsMiddleware:
    """`timed`: each answer carries its phases' times (app/web/timing.py; the benchmarks' WLM_TIMING_HEADER)."""

    def __init__(self, app: ASGIApp, paths: Sequence[HotPath], timed: bool = False) -> None:
        self.app = app
        self.paths = {(p.method, p.path): p for p in paths}
        self.timed = timed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = self.paths.get((scope["method"], scope["path"])) if scope["type"] == "http" else None
        if hot is None or scope["query_string"] or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        scope["route"] = hot
        marks = timing.start() if self.timed else None
        request = Request(scope, receive, send)
        try:
            # The dependency (the caller and its role) first, as FastAPI orders them: a caller without a key
            # learns that, not what is wrong with its body.
            dependency = await hot.dependency(request)
            raw = await request.body()
            if not raw:
                raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
            try:
                body = hot.body.model_validate_json(raw)
            except ValidationError as exc:
                raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from exc
            response = await hot.endpoint(body, dependency)
        except Exception as exc:  # noqa: BLE001 - answered by the application's own handler, as on any other route
            response = await _handled(request, exc)
        if marks is not None:
            response.raw_headers.append(timing.header(marks))
        await response(scope, receive, send)


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


async def _handled(request: Request, exc: Exception) -> Response:
    """The response of the application's own handler for `exc` (the nearest class it has one for)."""
    handlers = request.app.exception_handlers
    for cls in type(exc).__mro__:
        if cls in handlers:
            return await handlers[cls](request, exc)
    raise exc
