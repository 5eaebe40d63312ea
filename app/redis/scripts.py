"""Lua scripts on one Redis client: each owner registers its scripts (name -> source, its return codes' prelude
included), and calls them as their specifications build the calls (script_spec.py), on the process's pipelined
connection (pipeline.py) where it can."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.errors import lua_error
from app.redis.pipeline import MasterPipelines, ScriptPipeline, bulk, pack
from app.redis.script_spec import ScriptCall, includes
from app.redis.topology import ClusterClient

# Every script returns a status code first: this one when it did what it was asked (app.errors maps the others).
OK = 0


def lua_source(path: Path, includes_dir: Path, prelude: str) -> str:
    """What the script at `path` is loaded as: `prelude` (its owner's return codes), the includes its header names
    from `includes_dir` (each behind the includes it names itself, each once), then its body."""
    body = path.read_text()
    return prelude + "".join(_included(includes(body), includes_dir, set())) + body


def _included(names: tuple[str, ...], includes_dir: Path, seen: set[str]) -> list[str]:
    parts: list[str] = []
    for name in names:
        if name not in seen:
            seen.add(name)
            text = (includes_dir / f"{name}.lua").read_text()
            parts += [*_included(includes(text), includes_dir, seen), text, "\n"]
    return parts


class Scripts:
    def __init__(self, redis: Redis, sources: Mapping[str, str] | None = None) -> None:
        self._redis = redis
        self._scripts: dict[str, AsyncScript] = {}
        self._sources: dict[str, str] = {}
        self._evalsha: dict[str, bytes] = {}
        self._pipeline = ScriptPipeline.of(redis)
        self._masters = MasterPipelines(redis) if isinstance(redis, ClusterClient) else None
        # Writes a replica must confirm, each followed by its WAIT: a WAIT holds its connection until a replica
        # answers, which must not hold the other scripts' calls behind it.
        self._confirmed = ScriptPipeline.of(redis)
        self.register(sources or {})

    def register(self, sources: Mapping[str, str]) -> None:
        """Scripts by name, each its whole source. An owner may register its scripts again (each view of its records
        does) with the same sources; another source under a registered name is a bug of its owners."""
        for name, text in sources.items():
            if name in self._sources:
                if self._sources[name] != text:
                    raise ValueError(f"another script is registered as {name}")
                continue
            self._sources[name] = text
            script = self._redis.register_script(text)
            self._scripts[name] = script
            self._evalsha[name] = b"$7\r\nEVALSHA\r\n" + bulk(script.sha.encode())

    async def call(self, call: ScriptCall, client: Redis | None = None) -> list[Any]:
        """Run a script and return what it returned, status code first; on `client` (one connection) if given."""
        if client is None or client is self._redis:
            reply = await self._send(call.script, call.keys, call.args)
            if reply is not None:
                return reply
            client = None
        return list(await self._scripts[call.script](keys=call.keys, args=call.args, client=client))

    async def _send(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> list[Any] | None:
        """EVALSHA packed here and sent on the pipelined connection (app/redis/pipeline.py; on a cluster, its keys'
        master's); None when the script must go redis-py's general way: not loaded yet (NOSCRIPT), an argument this
        packer does not take, a client whose connections are not pipelined, a cluster's redirection, or a connection
        that failed (redis-py's own retries then apply, as they always did). redis-py's general packing and command
        plumbing cost a quarter of the service's CPU on the single-request lifecycle (docs/benchmarks.md,
        bench/profile_lifecycle.py); these scripts are all the hot path sends."""
        if self._pipeline is None and (self._masters is None or not keys):
            return None
        try:
            packed = _pack(self._evalsha[name], keys, args)
        except TypeError:
            return None
        try:
            if self._pipeline is not None:
                return list(await self._pipeline.call(packed))
            assert self._masters is not None
            reply = await self._masters.call(keys[0], packed)
            return None if reply is None else list(reply)
        except (NoScriptError, RedisConnectionError, RedisTimeoutError):
            return None

    async def call_and_wait(self, call: ScriptCall, wait_ms: int) -> tuple[list[Any], int] | None:
        """`call` on a pipelined connection of its own, followed by a WAIT for one replica (up to `wait_ms`) that the
        calls of one turn share: what the script returned, and how many replicas have it (0 when the WAIT failed:
        the script ran, and must not run again). None where `_send` would give None and the script did not run: the
        caller then sends both on one connection of redis-py's. A lost connection before the script's reply is
        raised: whether it ran is unknown, and a resend with the same idempotency key settles it."""
        if self._confirmed is None:
            return None
        try:
            packed = _pack(self._evalsha[call.script], call.keys, call.args)
        except TypeError:
            return None
        reply, replicas = await self._confirmed.call_confirmed(packed, pack(b"WAIT", b"1", b"%d" % wait_ms))
        if isinstance(reply, NoScriptError):
            return None
        if isinstance(reply, BaseException):
            raise reply
        return list(reply), 0 if isinstance(replicas, BaseException) else int(replicas)

    async def aclose(self) -> None:
        for pipeline in (self._pipeline, self._confirmed, self._masters):
            if pipeline is not None:
                await pipeline.aclose()

    async def run(self, call: ScriptCall, client: Redis | None = None) -> list[Any]:
        """Run a script; a return code other than OK is raised as the AppError mapped to it in app.errors."""
        return checked(await self.call(call, client))


def checked(result: list[Any]) -> list[Any]:
    """What a script returned after its return code, which is raised as its AppError (app.errors) unless OK."""
    code = int(result[0])
    if code != OK:
        raise lua_error(code, result[1:])
    return list(result[1:])


def _encoded(value: Any) -> bytes:
    """As redis-py encodes a command's arguments: text as UTF-8, numbers as their decimal text, bytes as they are."""
    kind = type(value)
    if kind is str:
        return value.encode()
    if kind is int:
        return b"%d" % value
    if kind is bytes:
        return value
    if kind is float:
        return repr(value).encode()
    raise TypeError(f"not a script argument: {kind.__name__}")


# Keys as the protocol writes them, by key. A call names mostly its environment's keys, the same few dozen every
# time: packed anew, they were most of a select's packing, itself several per cent of the service's CPU on the
# single-request lifecycle (docs/benchmarks.md, session 36). Keys named once (an idempotency key's) pass through
# too; the cache starts again when full.
_PACKED_KEYS: dict[str, bytes] = {}
MAX_PACKED_KEYS = 4096


def _packed_key(key: str) -> bytes:
    packed = _PACKED_KEYS.get(key)
    if packed is None:
        packed = bulk(_encoded(key))
        if len(_PACKED_KEYS) >= MAX_PACKED_KEYS:
            _PACKED_KEYS.clear()
        _PACKED_KEYS[key] = packed
    return packed


def _pack(evalsha: bytes, keys: Sequence[str], args: Sequence[Any]) -> bytes:
    """EVALSHA sha numkeys key... arg... in the protocol (RESP). The keys come packed from their cache; the arguments,
    text most of a batch's thousands of values, are encoded and framed inline: two function calls per value cost a
    batched lifecycle some 5 % of the service's CPU."""
    try:
        named = [_PACKED_KEYS[key] for key in keys]
    except KeyError:
        named = [_packed_key(key) for key in keys]
    values = [value.encode() if type(value) is str else _encoded(value) for value in args]
    parts = [b"*%d\r\n" % (3 + len(keys) + len(values)), evalsha, bulk(b"%d" % len(keys)), *named]
    parts += [b"$%d\r\n%b\r\n" % (len(value), value) for value in values]
    return b"".join(parts)
