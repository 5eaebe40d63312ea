"""The scheduler election (after TIBCO Rendezvous distributed queues: docs/sources.md): every member heartbeats
lua/elect.lua, and resigns with lua/resign.lua when it stops. The epoch is the fencing token: it grows by one with every new holder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from app.queues.scripts import source
from app.redis.context import RedisContext
from app.redis.script_spec import ScriptSpec

LUA_DIR = Path(__file__).parent / "lua"
_KEYS = "members, holder"
ELECT = ScriptSpec.of("elect", _KEYS, "member, weight, activation_ms, info")
RESIGN = ScriptSpec.of("resign", _KEYS, "member")
SPECS = (ELECT, RESIGN)


def scheduler_keys(prefix: str) -> tuple[str, str]:
    """The election's members and holder (one hash tag, so the election is one script)."""
    tag = f"{{{prefix}:scheduler}}"
    return f"{tag}:members", f"{tag}:holder"


@dataclass(frozen=True, slots=True)
class Election:
    active: bool
    epoch: int
    holder: str | None
    outcome: str  # took, kept, yielded, resigned, standby


@dataclass(frozen=True, slots=True)
class Member:
    member: str
    weight: int
    seen_ms_ago: int
    info: dict[str, Any]


def _election(result: list[Any]) -> Election:
    active, epoch, holder, outcome = result
    return Election(bool(int(active)), int(epoch), str(holder) or None, str(outcome))


@cache
def election_sources() -> dict[str, str]:
    """The election's scripts (lua/), loaded behind the queues' prelude and `base` include."""
    return {spec.name: source(spec.name, LUA_DIR) for spec in SPECS}


class SchedulerElection:
    """The election's records, its scripts registered on the shared context's."""

    def __init__(self, context: RedisContext) -> None:
        self.context = context
        self.keys = scheduler_keys(context.prefix)
        context.scripts.register(election_sources())

    async def elect(self, member: str, weight: int, activation_ms: int, info: str) -> Election:
        """One heartbeat of `member` (`info`: JSON of its host and pid): renew, take or give up the role."""
        args = [member, weight, activation_ms, info]
        return _election(await self.context.scripts.call(ELECT(self.keys, args)))

    async def resign(self, member: str) -> Election:
        """Leave the election; a holder gives the role up at once."""
        return _election(await self.context.scripts.call(RESIGN(self.keys, [member])))

    async def status(self) -> tuple[dict[str, str], list[Member]]:
        """The holder's hash and the members, as stored (Redis's time for their ages)."""
        members_key, holder_key = self.keys
        async with self.context.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(holder_key)
            pipe.hgetall(members_key)
            holder, members = await pipe.execute()
        now_ms = await self.context.clock_ms(near=members_key)
        listed = []
        for name, raw in members.items():
            member = json.loads(raw)
            listed.append(Member(name, member["weight"], now_ms - member["seen"], json.loads(member["info"])))
        return holder, listed
