"""An async client for the WLM service: queue managers queue work, servers run a handler over it.

    async with await QueueManager.connect(url, key, "CB", "BANK1") as qm:
        await qm.insert("PAYROLL", {"n": 1}, classification={"userid": "ATM01"})

    server = await Server.connect(url, key, "CB", "BANK1", "PAYROLL", worker_tasks=4)
    await server.serve(handler, stop_event=stop)  # returns once stopped, disconnected
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar

import httpx

log = logging.getLogger(__name__)

T = TypeVar("T")
Handler = Callable[[dict[str, Any]], Awaitable[Any]]

ATTEMPTS = 3  # tries of a retried call (an idempotent insert, an end, a disconnect)
BACKOFF_S = 0.2  # first pause after a transient failure; doubled per failure up to MAX_BACKOFF_S
MAX_BACKOFF_S = 5.0
# An end that can no longer apply: the request already ended, or it went to another server (lease expired,
# or this server's connection was replaced); the service delivers it again or has its outcome already.
STALE_END = frozenset({"already_ended", "not_holder", "unknown_work"})


class WlmError(Exception):
    """An error answer of the service: HTTP status, the stable `code`, the message and the whole body."""

    def __init__(self, status: int, code: str, message: str, body: Any) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.body = status, code, message, body

    @property
    def connection_lost(self) -> bool:
        """The connect token is no longer valid (disconnected, or unknown to the service): connect again."""
        return (self.status, self.code) in {(404, "unknown_connection"), (409, "connection_closed"), (409, "server_not_registered")}


def _transient(exc: Exception) -> bool:
    return isinstance(exc, httpx.TransportError) or (isinstance(exc, WlmError) and exc.status >= 500)


async def _retrying(call: Callable[[], Awaitable[T]], attempts: int = ATTEMPTS) -> T:
    """`call()`, tried again after connection errors and 5xx answers, up to `attempts` times in all."""
    attempt = 1
    while True:
        try:
            return await call()
        except (httpx.TransportError, WlmError) as exc:
            if attempt >= attempts or not _transient(exc):
                raise
        await asyncio.sleep(BACKOFF_S * 2 ** (attempt - 1))
        attempt += 1


def _compact(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


class _Connection:
    """A connection (IWM4CON) and the HTTP client that carries its calls."""

    def __init__(self, http: httpx.AsyncClient, connect_body: dict[str, Any], created: dict[str, Any]) -> None:
        self._http = http
        self._connect_body = connect_body
        self._accept(created)

    def _accept(self, created: dict[str, Any]) -> None:
        self.info: dict[str, Any] = created  # the connect answer: id, token, heartbeat_interval_s, exit_secret, ...
        self.token: str = created["token"]

    @classmethod
    async def _open(cls, url: str, api_key: str, body: dict[str, Any], transport: httpx.AsyncBaseTransport | None) -> Self:
        # No connection limit: every worker of a server holds one in its long poll.
        limits = httpx.Limits(max_connections=None)
        http = httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {api_key}"}, transport=transport, timeout=30, limits=limits)
        try:
            created = await _send(http, "POST", "/v1/connections", json=body)
        except BaseException:
            await http.aclose()
            raise
        return cls(http, body, created)

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return await _send(self._http, method, path, **kwargs)

    async def heartbeat(self) -> dict[str, Any]:
        return await self._call("POST", f"/v1/connections/{self.token}/heartbeat")  # type: ignore[no-any-return]

    async def disconnect(self) -> dict[str, Any] | None:
        """IWM4DIS, then close the HTTP client; the service's answer (a queue manager's says how many of its queued
        requests were `purged`). A second call does nothing and returns None."""
        if self._http.is_closed:
            return None
        try:
            return await _retrying(lambda: self._call("DELETE", f"/v1/connections/{self.token}"))  # type: ignore[no-any-return]
        finally:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.disconnect()


async def _send(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> Any:
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


class QueueManager(_Connection):
    """A queue manager: classifies and queues work (IWM4ECRE, IWM4QIN, IWM4QDE)."""

    @classmethod
    async def connect(
        cls,
        url: str,
        api_key: str,
        subsystem_type: str,
        subsystem_name: str,
        node: str | None = None,
        exit_url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> QueueManager:
        body = _compact(role="queue_manager", subsystem_type=subsystem_type, subsystem_name=subsystem_name, node=node, exit_url=exit_url)
        return await cls._open(url, api_key, body, transport)

    async def enclave(self, classification: dict[str, str], parent: str | None = None) -> dict[str, Any]:
        """IWM4ECRE: classify once, then insert several requests with the enclave's token."""
        body = _compact(connect_token=self.token, classification=classification, parent=parent)
        return await self._call("POST", "/v1/enclaves", json=body)  # type: ignore[no-any-return]

    async def insert(
        self,
        application_environment: str,
        payload: Any,
        *,
        classification: dict[str, str] | None = None,
        enclave_token: str | None = None,
        userid: str | None = None,
        idempotency_key: str | None = None,
        node: str | None = None,
    ) -> dict[str, Any]:
        """IWM4QIN: queue one request; give a `classification` or an `enclave_token`."""
        item = _compact(classification=classification, enclave_token=enclave_token, userid=userid, idempotency_key=idempotency_key)
        body = _compact(connect_token=self.token, application_environment=application_environment, node=node) | item | {"payload": payload}
        # Only a request with an idempotency key is retried: the service answers a repeated key with the request
        # it already queued. Without a key, a retry after a lost answer (the insert may have been done) could
        # queue the request twice.
        attempts = ATTEMPTS if idempotency_key else 1
        return await _retrying(lambda: self._call("POST", "/v1/work", json=body), attempts)

    async def insert_batch(self, application_environment: str, items: list[dict[str, Any]], node: str | None = None) -> list[dict[str, Any]]:
        """IWM4QIN for many requests, all or none; each item as `insert`'s keyword arguments and `payload`.
        Retried as `insert` is, when every item has an idempotency key."""
        body = _compact(connect_token=self.token, application_environment=application_environment, node=node, items=items)
        attempts = ATTEMPTS if all(item.get("idempotency_key") for item in items) else 1
        answer = await _retrying(lambda: self._call("POST", "/v1/work:batch", json=body), attempts)
        return answer["items"]  # type: ignore[no-any-return]

    async def delete(self, token: str) -> None:
        """IWM4QDE: remove a request that is still queued (409 not_queued once a server selected it)."""
        await self._call("DELETE", f"/v1/work/{token}", params={"connect_token": self.token})


class Server(_Connection):
    """A server: selects work for its application environment and runs a handler over it (IWM4SSL, IWM4STEN)."""

    def __init__(self, http: httpx.AsyncClient, connect_body: dict[str, Any], created: dict[str, Any]) -> None:
        super().__init__(http, connect_body, created)
        self._reconnecting = asyncio.Lock()

    @classmethod
    async def connect(
        cls,
        url: str,
        api_key: str,
        subsystem_type: str,
        subsystem_name: str,
        application_environment: str,
        worker_tasks: int = 1,
        worker_weight: int = 1,
        overflow: bool = False,
        instance: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> Server:
        """`instance`: this process's name as its launcher gave it (WLM_SERVER_INSTANCE), if a launcher started it."""
        body = {
            "role": "server",
            "subsystem_type": subsystem_type,
            "subsystem_name": subsystem_name,
            "application_environment": application_environment,
            "worker_tasks": worker_tasks,
            "worker_weight": worker_weight,
            "overflow": overflow,
            **({"instance": instance} if instance else {}),
        }
        return await cls._open(url, api_key, body, transport)

    async def serve(self, handler: Handler, *, wait_seconds: float = 20, stop_event: asyncio.Event | None = None) -> None:
        """Run `handler` over this server's work with `worker_tasks` workers until `stop_event` is set (a
        terminate answer or an error sets it too); then end what is in hand, disconnect and return.

        `handler(item)` gets the selected item; its (JSON) return value is the end's `result`; an exception
        ends the request as failed."""
        stopping = stop_event if stop_event is not None else asyncio.Event()
        tasks = [self._heartbeats(stopping)] + [self._worker(handler, wait_seconds, stopping) for _ in range(self.info["worker_tasks"])]
        try:
            outcomes = await asyncio.gather(*(_stop_on_error(task, stopping) for task in tasks), return_exceptions=True)
        finally:
            await self.disconnect()
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _worker(self, handler: Handler, wait_seconds: float, stopping: asyncio.Event) -> None:
        ended: list[dict[str, Any]] = []  # the previous request's end, sent with the next select
        failures = 0
        while not stopping.is_set():
            token = self.token
            body = {"connect_token": token, "wait_seconds": wait_seconds, "max_items": 1, "begin": True, "end": ended}
            try:
                answer = await _unless(stopping, self._call("POST", "/v1/work/select", json=body, timeout=wait_seconds + 30))
            except _Stopped:
                break  # the select was cancelled: its end may not have been done; the plain end below does it
            except (httpx.TransportError, WlmError) as exc:
                if ended and isinstance(exc, WlmError) and exc.code in STALE_END:
                    log.warning("the end of %s no longer applies: %s", ended[0]["token"], exc)
                    ended = []
                else:
                    failures += 1
                    await self._recover(exc, token, failures, stopping)
                continue
            failures, ended = 0, []
            if answer is None:
                continue  # nothing came within wait_seconds
            if answer["terminate"]:
                log.info("the service terminates this server (%s): %s", answer["reason_code"], answer["reason"])
                stopping.set()
            for item in answer["items"]:
                ended.append(await _run(handler, item))
        for end in ended:
            await self._end(end)

    async def _end(self, end: dict[str, Any]) -> None:
        body = {"connect_token": self.token, "outcome": end["outcome"], "result": end.get("result")}
        try:
            await _retrying(lambda: self._call("POST", f"/v1/work/{end['token']}/end", json=body))
        except WlmError as exc:
            if exc.code not in STALE_END and not exc.connection_lost:  # a closed connection gave its work back
                raise
            log.warning("the end of %s no longer applies: %s", end["token"], exc)

    async def _heartbeats(self, stopping: asyncio.Event) -> None:
        failures = 0
        while not await _wait(stopping, self.info["heartbeat_interval_s"]):
            token = self.token
            try:
                await self.heartbeat()
                failures = 0
            except (httpx.TransportError, WlmError) as exc:
                failures += 1
                await self._recover(exc, token, failures, stopping)

    async def _recover(self, exc: httpx.TransportError | WlmError, token: str, failures: int, stopping: asyncio.Event) -> None:
        """After a call with `token` failed: connect again if the connection is gone, back off if the failure
        is transient, else raise."""
        if isinstance(exc, WlmError) and exc.connection_lost:
            log.warning("connection lost (%s); connecting again", exc)
            try:
                await self._reconnect(token)
                return
            except (httpx.TransportError, WlmError) as again:
                exc = again
        if not _transient(exc):
            raise exc
        log.warning("call failed (%s); retrying", exc)
        await _wait(stopping, min(BACKOFF_S * 2 ** (failures - 1), MAX_BACKOFF_S))

    async def _reconnect(self, stale_token: str) -> None:
        # Not retried here: a connect is not idempotent; a transient failure is retried by the caller's loop.
        async with self._reconnecting:
            if self.token == stale_token:  # not yet replaced by another worker
                self._accept(await self._call("POST", "/v1/connections", json=self._connect_body))


class _Stopped(Exception):
    """The stop event came before the call's answer."""


async def _unless(stopping: asyncio.Event, call: Awaitable[T]) -> T:
    """The call's result, unless `stopping` is set first: then the call is cancelled and _Stopped raised."""
    task = asyncio.ensure_future(call)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        raise _Stopped
    return task.result()


async def _wait(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to `seconds` for `event`; whether it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
    return event.is_set()


async def _run(handler: Handler, item: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"token": item["token"], "outcome": "completed", "result": await handler(item)}
    except Exception:
        log.exception("the handler failed on %s", item["token"])
        return {"token": item["token"], "outcome": "failed"}


async def _stop_on_error(task: Awaitable[None], stopping: asyncio.Event) -> None:
    """A serve task; its failure stops the others (they end what they hold) before serve() raises it."""
    try:
        await task
    except BaseException:
        stopping.set()
        raise


def install_signal_handlers(stop_event: asyncio.Event) -> None:
    """SIGTERM and SIGINT set `stop_event`: a server finishes what it holds, disconnects and returns."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_event.set)
