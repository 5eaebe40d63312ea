"""Guards at the HTTP edge, before routing."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send


class RejectNulMiddleware:
    """NUL characters in paths or query strings are refused with 400: they are never meaningful here, and
    PostgreSQL cannot store or compare text that contains them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ("\x00" in scope["path"] or b"%00" in scope["query_string"].lower()):
            body = json.dumps({"error": {"code": "invalid_characters", "message": "NUL characters are not allowed in the URL"}}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


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
    def __init__(self, app: ASGIApp, paths: Sequence[HotPath]) -> None:
        self.app = app
        self.paths = {(p.method, p.path): p for p in paths}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = self.paths.get((scope.get("method"), scope.get("path"))) if scope["type"] == "http" else None
        if hot is None or scope["query_string"] or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        scope["route"] = hot
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
            return await handlers[cls](request, exc)  # type: ignore[no-any-return]
    raise exc
