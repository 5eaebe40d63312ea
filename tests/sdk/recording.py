"""A transport that logs what the SDK sent and how the service answered, in front of the app (ASGI) or a socket."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Sent:
    method: str
    path: str
    body: Any  # the request's JSON body, None without one
    status: int | None = None  # None until answered (and for ever, for a request cancelled or failed on the way)


class RecordingTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.sent: list[Sent] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sent = Sent(request.method, request.url.path, json.loads(request.content) if request.content else None)
        self.sent.append(sent)
        response = await self.inner.handle_async_request(request)
        sent.status = response.status_code
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def ends(self) -> dict[str, str]:
        """Outcome by work token, of every end sent (with a select or on its own)."""
        outcomes = {}
        for sent in self.sent:
            if sent.path == "/v1/work/select":
                outcomes |= {end["token"]: end["outcome"] for end in sent.body["end"]}
            elif sent.path.endswith("/end"):
                outcomes[sent.path.split("/")[3]] = sent.body["outcome"]
        return outcomes
