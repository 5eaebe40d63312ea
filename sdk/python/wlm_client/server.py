"""A server's client: selects work for its application environment and runs a handler over it.

server = await Server.connect(url, key, "CB", "BANK1", "PAYROLL", worker_tasks=4)
await server.serve(handler, stop_event=stop)  # returns once stopped, disconnected
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from wlm_client.iwm_connection import BACKOFF_S, MAX_BACKOFF_S, IwmConnection, WlmError, retrying, transient

log = logging.getLogger(__name__)

T = TypeVar("T")
Handler = Callable[[dict[str, Any]], Awaitable[Any]]

# An end that can no longer apply: the request already ended, or it went to another server (lease expired,
# or this server's connection was replaced); the service delivers it again or has its outcome already.
STALE_END = frozenset({"already_ended", "not_holder", "unknown_work"})
# The longest error text an end carries (the service's limit).
ERROR_TEXT_CHARS = 2_048


class DeadLetter(Exception):
    """Raised by a handler for a request that must not be tried again: it ends failed and is kept in its
    environment's dead letters, with this exception's text, for an operator to look at, retry or discard."""


class Server(IwmConnection):
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
        body = {"connect_token": self.token, **{name: value for name, value in end.items() if name != "token"}}
        try:
            await retrying(lambda: self._call("POST", f"/v1/work/{end['token']}/end", json=body))
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
        if not transient(exc):
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
    except Exception as exc:
        log.exception("the handler failed on %s", item["token"])
        error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_CHARS]
        return {"token": item["token"], "outcome": "failed", "error": error, "dead_letter": isinstance(exc, DeadLetter)}


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
