"""An IWM connection to the WLM service (IWM4CON .. IWM4DIS: a connect token, not a network connection) over HTTP,
with the errors and retries both kinds share (wlm_client.queue_manager, wlm_client.server)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar

import httpx

T = TypeVar("T")

ATTEMPTS = 3  # tries of a retried call (an idempotent insert, an end, a disconnect)
BACKOFF_S = 0.2  # first pause after a transient failure; doubled per failure up to MAX_BACKOFF_S
MAX_BACKOFF_S = 5.0


class WlmError(Exception):
    """An error answer of the service: HTTP status, the stable `code`, the message and the whole body."""

    def __init__(self, status: int, code: str, message: str, body: Any) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.body = status, code, message, body

    @property
    def connection_lost(self) -> bool:
        """The connect token is no longer valid (disconnected, or unknown to the service): connect again."""
        return (self.status, self.code) in {(404, "unknown_connection"), (409, "connection_closed"), (409, "server_not_registered")}


def transient(exc: Exception) -> bool:
    return isinstance(exc, httpx.TransportError) or (isinstance(exc, WlmError) and exc.status >= 500)


async def retrying(call: Callable[[], Awaitable[T]], attempts: int = ATTEMPTS) -> T:
    """`call()`, tried again after transport errors (a refused or lost HTTP connection) and 5xx answers, up to
    `attempts` times in all."""
    attempt = 1
    while True:
        try:
            return await call()
        except (httpx.TransportError, WlmError) as exc:
            if attempt >= attempts or not transient(exc):
                raise
        await asyncio.sleep(BACKOFF_S * 2 ** (attempt - 1))
        attempt += 1


def compact(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


class IwmConnection:
    """An IWM connection (IWM4CON): its connect token, and the HTTP client that carries its calls."""

    def __init__(self, http: httpx.AsyncClient, connect_body: dict[str, Any], created: dict[str, Any]) -> None:
        self._http = http
        self._connect_body = connect_body
        self._accept(created)

    def _accept(self, created: dict[str, Any]) -> None:
        self.info: dict[str, Any] = created  # the connect answer: id, token, heartbeat_interval_s, exit_secret, ...
        self.token: str = created["token"]

    @classmethod
    async def _open(cls, url: str, api_key: str, body: dict[str, Any], transport: httpx.AsyncBaseTransport | None) -> Self:
        # No limit on HTTP connections: every worker of a server holds one in its long poll.
        limits = httpx.Limits(max_connections=None)
        http = httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {api_key}"}, transport=transport, timeout=30, limits=limits
        )
        try:
            created = await send(http, "POST", "/v1/connections", json=body)
        except BaseException:
            await http.aclose()
            raise
        return cls(http, body, created)

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return await send(self._http, method, path, **kwargs)

    async def heartbeat(self) -> dict[str, Any]:
        return await self._call("POST", f"/v1/connections/{self.token}/heartbeat")

    async def disconnect(self) -> dict[str, Any] | None:
        """IWM4DIS, then close the HTTP client; the service's answer (a queue manager's says how many of its queued
        requests were `purged`). A second call does nothing and returns None."""
        if self._http.is_closed:
            return None
        try:
            return await retrying(lambda: self._call("DELETE", f"/v1/connections/{self.token}"))
        finally:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.disconnect()


async def send(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> Any:
    """The answer's JSON body; None for 204; WlmError for a 4xx or 5xx."""
    response = await http.request(method, path, **kwargs)
    if response.status_code == 204:
        return None
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if response.is_error:
        error = body.get("error") if isinstance(body, dict) else None
        error = error if isinstance(error, dict) else {}
        raise WlmError(response.status_code, error.get("code", "http_error"), error.get("message", str(body)), body)
    return body
