"""Guards at the HTTP edge, before routing."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send


class RejectNulMiddleware:
    """NUL characters in paths or query strings are refused with 400: they are never meaningful here, and
    PostgreSQL cannot store or compare text that contains them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ("\x00" in scope["path"] or b"%00" in scope["query_string"].lower()):
            body = json.dumps({"error": {"code": "invalid_characters", "message": "NUL characters are not allowed in the URL"}}).encode()
            await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
