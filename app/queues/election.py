"""The scheduler election (seeds 003/004): every member heartbeats lua/elect.lua, and resigns with lua/resign.lua
when it stops. The epoch is the fencing token: it grows by one with every new holder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.queues import script_specs as specs
from app.queues.base import StoreBase
from app.queues.keys import scheduler_keys


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


class SchedulerElection(StoreBase):
    async def elect(self, member: str, weight: int, activation_ms: int, info: str) -> Election:
        """One heartbeat of `member` (`info`: JSON of its host and pid): renew, take or give up the role."""
        args = [member, weight, activation_ms, info]
        return _election(await self.scripts.call(specs.ELECT(scheduler_keys(self.prefix), args)))

    async def resign(self, member: str) -> Election:
        """Leave the election; a holder gives the role up at once."""
        return _election(await self.scripts.call(specs.RESIGN(scheduler_keys(self.prefix), [member])))

    async def election_status(self) -> tuple[dict[str, str], list[Member]]:
        """The holder's hash and the members, as stored (Redis's time for their ages)."""
        members_key, holder_key = scheduler_keys(self.prefix)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(holder_key)
            pipe.hgetall(members_key)
            holder, members = await pipe.execute()
        now_ms = await self.clock_ms(near=members_key)
        listed = []
        for name, raw in members.items():
            member = json.loads(raw)
            listed.append(Member(name, member["weight"], now_ms - member["seen"], json.loads(member["info"])))
        return holder, listed
