"""One Redis connection per process for the scripts' calls, pipelined: the calls made in one turn of the event loop
go out in one write, and the replies, which Redis sends in the order of the calls, are handed back in that order.

On the single-request lifecycle the service's CPU went to socket writes (one per call, a system call each),
redis-py's connection pool (a connection taken and given back per call) and its per-call timeouts (a task per
write); see docs/benchmarks.md. A pipelined connection has none of these, and a call cancelled while it waits
costs nothing: its reply is read and dropped in turn, where a pooled connection would have to be closed.

Only plain connections are pipelined (TCP or a Unix socket, RESP2, replies decoded, a password if any): for TLS,
credential providers or RESP3, `ScriptPipeline.of` gives None and the calls go through redis-py. On a Redis Cluster
each master gets one (`MasterPipelines`): a call goes to the master of its keys' slot (a script's keys share one).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import Connection, UnixDomainSocketConnection
from redis.exceptions import AskError, MovedError, SlotNotCoveredError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.redis.topology import ClusterClient

# A call not answered within this long means the connection is gone (or Redis is stuck): it is closed, and the
# calls waiting on it fail as a lost connection does. redis-py's default socket timeout, which it replaces.
REPLY_TIMEOUT_S = 5.0
CLIENT_NAME = b"wlm-scripts"


def bulk(value: bytes) -> bytes:
    """A bulk string of the protocol (RESP)."""
    return b"$%d\r\n%b\r\n" % (len(value), value)


def pack(*parts: bytes) -> bytes:
    """One command in the protocol: an array of bulk strings."""
    return b"*%d\r\n" % len(parts) + b"".join(map(bulk, parts))


class _Protocol(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.reader = hiredis.Reader(encoding="utf-8")
        self.waiting: deque[asyncio.Future[Any]] = deque()  # one per call sent or to send, in order
        self.outgoing: list[bytes] = []
        # The confirmation of the calls `send_confirmed` wrote since the last one (a command and its reply), and the
        # one written and not yet answered: at most one is out at a time (see `send_confirmed`).
        self.confirmation: tuple[bytes, asyncio.Future[Any]] | None = None
        self.confirming: asyncio.Future[Any] | None = None
        self.transport: asyncio.Transport | None = None
        self.lost = False
        # Calls written and replies read so far; the watchdog compares them with what they were at its last look.
        self.sent = self.answered = 0
        self._watchdog: asyncio.TimerHandle | None = None
        self._sent_at_watch = self._answered_at_watch = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's; the protocol API names the base class

    def send(self, command: bytes) -> asyncio.Future[Any]:
        if self.lost:
            raise RedisConnectionError("the pipelined connection to Redis was lost")
        reply = self.loop.create_future()
        self.waiting.append(reply)
        self.outgoing.append(command)
        if len(self.outgoing) == 1:
            # Written at the next turn of the loop, with every call the other requests make before then.
            self.loop.call_soon(self._flush)
        return reply

    def send_confirmed(self, command: bytes, confirmation: bytes) -> tuple[asyncio.Future[Any], asyncio.Future[Any]]:
        """`send(command)`, and the reply to `confirmation` (a WAIT, which confirms every write before it on the
        connection), written after every call of this turn; the calls that share it must shield it from their
        cancellation. Redis runs nothing after a WAIT on its connection until the WAIT is answered, so while one is
        out the calls written meanwhile share the next, written when it is answered: one WAIT after another, never
        a queue of them (a stalled replica would hold each for its whole timeout)."""
        reply = self.send(command)
        if self.confirmation is None:
            confirmed = self.loop.create_future()
            confirmed.add_done_callback(_retrieved)  # its callers may all have been cancelled
            self.confirmation = (confirmation, confirmed)
        return reply, self.confirmation[1]

    def _confirmed(self, _: asyncio.Future[Any]) -> None:
        self.confirming = None
        if self.confirmation is not None and not self.lost and not self.outgoing:
            self.loop.call_soon(self._flush)  # the next confirmation, with or without calls of its own

    def _flush(self) -> None:
        if self.lost or self.transport is None:
            return
        if self.confirmation is not None and self.confirming is None:
            command, reply = self.confirmation
            self.confirmation, self.confirming = None, reply
            reply.add_done_callback(self._confirmed)
            self.outgoing.append(command)
            self.waiting.append(reply)
        if not self.outgoing:
            return
        self.transport.write(b"".join(self.outgoing))
        self.sent += len(self.outgoing)
        self.outgoing.clear()
        if self._watchdog is None:
            self._watch_again()

    def _watch_again(self) -> None:
        self._sent_at_watch, self._answered_at_watch = self.sent, self.answered
        self._watchdog = self.loop.call_later(REPLY_TIMEOUT_S, self._watch)

    def _watch(self) -> None:
        """One timer while calls wait, not one per call: a connection that answered nothing for REPLY_TIMEOUT_S
        while a call was waiting is given up."""
        self._watchdog = None
        if self.lost:
            return
        if self.answered == self._answered_at_watch and self._sent_at_watch > self._answered_at_watch:
            self._fail(RedisTimeoutError(f"Redis answered nothing for {REPLY_TIMEOUT_S:g} s"))
        elif self.sent > self.answered:
            self._watch_again()

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as exc:
                self._fail(RedisConnectionError(f"Redis sent what is not its protocol: {exc}"))
                return
            if reply is False:
                return
            if not self.waiting:
                self._fail(RedisConnectionError("Redis sent a reply to no call"))
                return
            waiter = self.waiting.popleft()
            self.answered += 1
            if waiter.done():  # its caller was cancelled
                continue
            if isinstance(reply, hiredis.ReplyError):
                waiter.set_exception(BaseParser.parse_error(str(reply)))
            else:
                waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost:
            self._fail(RedisConnectionError(f"the pipelined connection to Redis was lost ({exc or 'closed'})"))

    def _fail(self, error: Exception) -> None:
        self.lost = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        for waiter in self.waiting:
            if not waiter.done():
                waiter.set_exception(error)
        if self.confirmation is not None and not self.confirmation[1].done():
            self.confirmation[1].set_exception(error)
        self.confirmation = self.confirming = None
        self.waiting.clear()
        self.outgoing.clear()
        if self.transport is not None:
            self.transport.abort()


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class ScriptPipeline:
    """The connection, opened on first use (and again after it was lost) on the running loop."""

    def __init__(self, address: dict[str, Any]) -> None:
        self._address = address
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Task[_Protocol] | None = None

    @classmethod
    def of(cls, redis: Redis) -> ScriptPipeline | None:
        if not isinstance(redis, Redis):  # a Redis Cluster: one per master (MasterPipelines)
            return None
        pool = redis.connection_pool
        return cls.of_connection(pool.connection_class, pool.connection_kwargs)

    @classmethod
    def of_connection(cls, connection_class: type, kwargs: dict[str, Any]) -> ScriptPipeline | None:
        """A pipeline to where connections of `connection_class` made with `kwargs` go, if it can be plain."""
        plain = connection_class in (Connection, UnixDomainSocketConnection)
        if (
            not plain
            or not kwargs.get("decode_responses")
            or kwargs.get("credential_provider")
            or kwargs.get("protocol") not in (None, 2, "2")
        ):
            return None
        address = {name: kwargs.get(name) for name in ("host", "port", "path", "db", "username", "password")}
        return cls(address)

    async def call(self, command: bytes) -> Any:
        """The reply to `command`; an error reply is raised as redis-py raises it (NoScriptError, ResponseError),
        a lost or silent connection as redis-py's ConnectionError or TimeoutError."""
        protocol = self._protocol
        if protocol is None or protocol.lost or protocol.loop is not asyncio.get_running_loop():
            protocol = await self._connected()
        return await protocol.send(command)

    async def call_confirmed(self, command: bytes, confirmation: bytes) -> tuple[Any, Any]:
        """The reply to `command` and to `confirmation`, sent after it and after every other call of this turn (see
        `_Protocol.send_confirmed`), each as `call` gives it or as the exception it raised: a caller must know
        whether `command` ran when its confirmation failed."""
        protocol = self._protocol
        if protocol is None or protocol.lost or protocol.loop is not asyncio.get_running_loop():
            protocol = await self._connected()
        reply, confirmed = protocol.send_confirmed(command, confirmation)
        results = await asyncio.gather(reply, asyncio.shield(confirmed), return_exceptions=True)
        return results[0], results[1]

    async def _connected(self) -> _Protocol:
        """The connection being opened, or a new one: the calls that find none share one attempt, and a call after
        an attempt failed makes another."""
        connecting = self._connecting
        if connecting is None or connecting.done() or connecting.get_loop() is not asyncio.get_running_loop():
            connecting = self._connecting = asyncio.ensure_future(self._connect())
            connecting.add_done_callback(_retrieved)  # its callers may all have been cancelled meanwhile
        return await asyncio.shield(connecting)

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        a = self._address
        protocol = _Protocol(loop)
        try:
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                if a["path"]:
                    await loop.create_unix_connection(lambda: protocol, a["path"])
                else:
                    await loop.create_connection(lambda: protocol, a["host"], a["port"])
                if a["password"]:
                    credentials = (a["username"], a["password"]) if a["username"] else (a["password"],)
                    await protocol.send(pack(b"AUTH", *(str(c).encode() for c in credentials)))
                if a["db"]:
                    await protocol.send(pack(b"SELECT", str(a["db"]).encode()))
                await protocol.send(pack(b"CLIENT", b"SETNAME", CLIENT_NAME))  # for CLIENT LIST, and the tests
        except BaseException as exc:
            if protocol.transport is not None:
                protocol.transport.abort()
            if isinstance(exc, OSError | TimeoutError):
                raise RedisConnectionError(f"cannot open the pipelined connection to Redis: {exc}") from exc
            raise
        self._protocol = protocol
        return protocol

    async def aclose(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._protocol = None


class MasterPipelines:
    """A pipelined connection per master of a Redis Cluster, each opened on first use: a call goes to the master that
    the cluster client's slot map gives its key's slot. What the map does not know yet, or got wrong (MOVED, ASK: a
    slot moved, a replica took over), goes redis-py's way, which follows the redirection, and the map learns it (a
    MOVED teaches the client as its own calls do); so does a call whose master is lost, and the topology is read
    again. Redirected calls did not run; a lost connection's, as on one server, may have."""

    def __init__(self, cluster: ClusterClient) -> None:
        self._cluster = cluster
        self._pipelines: dict[str, ScriptPipeline | None] = {}

    def _pipeline(self, key: str) -> ScriptPipeline | None:
        cluster = self._cluster
        if not cluster.knows_topology():  # redis-py's next call reads it
            return None
        try:
            node: ClusterNode | None = cluster.get_node_from_key(key)
        except SlotNotCoveredError:
            return None
        if node is None:
            return None
        if node.name not in self._pipelines:
            self._pipelines[node.name] = ScriptPipeline.of_connection(node.connection_class, {**node.connection_kwargs, "db": 0})
        return self._pipelines[node.name]

    async def call(self, key: str, command: bytes) -> Any | None:
        """The reply to `command` from the master of `key`'s slot, or None when it must go redis-py's way (it did
        not run). A lost connection is raised, as `ScriptPipeline.call` raises it."""
        pipeline = self._pipeline(key)
        if pipeline is None:
            return None
        try:
            return await pipeline.call(command)
        except MovedError as redirect:
            await self._cluster.moved(redirect)
            return None
        except AskError:
            return None
        except (RedisConnectionError, RedisTimeoutError):
            self._cluster.lost()
            raise

    async def aclose(self) -> None:
        pipelines, self._pipelines = [p for p in self._pipelines.values() if p is not None], {}
        for pipeline in pipelines:
            await pipeline.aclose()
