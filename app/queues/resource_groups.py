"""Resource groups: caps on the requests a group of service classes has selected or begun at once, across every
environment, node and replica.

A group's count lives in a slot of its own (GroupKeys), since its classes' queues are in every environment's
slot. On one Redis a select takes, uses and settles its groups' slots in its own script call (select_grouped.lua;
`in_call`), and an end frees its requests' slots in its own (end_grouped.lua). On a Redis Cluster no one script can
count the group and select, nor can it on one Redis where a group has a min_in_flight (the class order waits on the
group's count: `preferred_order`). There a select takes the groups' slots first (group_take.lua, each a reservation
that lapses), selects within them (select_work in lua/includes/select_work.lua skips a class whose group granted
nothing, and takes no more of a group than it granted), then settles (group_settle.lua): the slots it used hold its
requests until they end, the others are given back, and the requests the select ended free theirs. That is three
calls (on a Redis Cluster, the take and the settle a call per group) when every group grants all the select asks; a
select carrying ends whose group comes short ends them first, so that the slots they free count for it. An end on
its own frees its request's slot after it. The scheduler's pass reconciles the rest: a held member no longer selected
or begun (`stale_members`: given back when its lease expired or its server died, or ended where the release was
lost) is freed, once held a few passes (shorter work never costs the pass a read); and a request in flight that no
group holds (`unheld_members`: its select's settle was lost) is held before the select's reservation lapses. Held
slots never lapse on their own, since a request's lease is renewed while it runs.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from redis.asyncio import RedisCluster

from app.queues import script_specs as specs
from app.queues.base import AeConfig, GroupCap, StoreBase, StorePart
from app.queues.keys import AeKeys, GroupKeys, parse_token
from app.queues.request_meta import RequestMeta, RequestState
from spark_jobs.manager import select_order
from spark_jobs.manager.select_order import RankedClass

T = TypeVar("T")
R = TypeVar("R")
# Requests' metadata read per round trip when the held and the in-flight requests are compared.
READ_CHUNK = 1000


@dataclass(frozen=True, slots=True)
class Grant:
    group: GroupCap
    reservation: str
    granted: int
    in_flight: int  # the group's, before this grant


@dataclass(frozen=True, slots=True)
class Settlement:
    """What one settle does to a group's slots (group_settle.lua): a reservation's `slots` settled, `hold` held and
    the rest given back; `release` freed (either wakes the places its cap refused); `short`: the notify channel of a
    select that left the group's work for lack of slots, listed to be woken when one is freed."""

    group: GroupCap
    reservation: str = ""
    slots: int = 0
    hold: Sequence[str] = ()
    release: Sequence[str] = ()
    short: str = ""


@dataclass(frozen=True, slots=True)
class GroupsInCall:
    """The resource groups a select or an end takes and settles in its own call, on one Redis (select_grouped.lua,
    end_grouped.lua): their keys, per class of the call its group's number (0: none), per group its max_in_flight
    (0: no cap)."""

    keys: list[str]
    group_of_class: list[int]
    max_in_flight: list[int]


@dataclass(frozen=True, slots=True)
class GroupFigures:
    in_flight: int  # held and reserved
    capped_ms: int  # how long its work has waited on the cap, in all (while capped, up to now)


def groups_of(config: AeConfig) -> list[GroupCap]:
    """The distinct groups of an environment's classes, in class order."""
    return list(dict.fromkeys(group for group in config.class_groups if group is not None))


def group_by_class(config: AeConfig) -> dict[str, GroupCap]:
    return {sc: group for sc, group in zip(config.class_order, config.class_groups, strict=False) if group is not None}


def preferred_order(config: AeConfig, grants: Sequence[Grant]) -> list[tuple[str, int]]:
    """The classes in the order a select looks at them, each with its tier (pure; spark_jobs/manager/select_order.py
    `preferred_order`): a class whose group is under its min_in_flight before the other classes of its importance."""
    under = {g.group.name for g in grants if g.group.min_in_flight is not None and g.in_flight < g.group.min_in_flight}
    groups = config.class_groups or (None,) * len(config.class_order)
    classes = [
        RankedClass(sc, tier, group.name if group is not None else None)
        for sc, tier, group in zip(config.class_order, config.tiers, groups, strict=True)
    ]
    return select_order.preferred_order(classes, under)


def member_of(k: AeKeys, request_id: str, meta: RequestMeta) -> str:
    """A request's member in its group, from its metadata (as selected, or its work record): one delivery of one life
    of it, so a request given back and selected again is another member, and a late release of the old one frees
    nothing of the new. (group_member in lua/includes/groups.lua makes the same.)"""
    return f"{k.member_prefix}{request_id}|{int(meta.life)}|{int(meta.deliveries)}"


def ended_members(k: AeKeys, groups: Mapping[str, GroupCap], records: Iterable[RequestMeta]) -> dict[GroupCap, list[str]]:
    """The members of ended requests (their work records) by their groups (class -> group)."""
    freed: dict[GroupCap, list[str]] = {}
    for record in records:
        group = groups.get(record.service_class)
        if group is not None:
            freed.setdefault(group, []).append(member_of(k, record.id, record))
    return freed


async def _each(call: Callable[[Sequence[T]], Awaitable[list[R]]], parts: Sequence[Sequence[T]]) -> list[R]:
    """`call`'s results for each part, in order: the parts' calls at once (a Redis Cluster's groups), and the one
    part of one Redis awaited as it is (gathered, each call was a task of its own: two per grouped select)."""
    if len(parts) <= 1:
        return await call(parts[0]) if parts else []
    return [result for part in await asyncio.gather(*(call(part) for part in parts)) for result in part]


class ResourceGroups(StorePart):
    def __init__(self, base: StoreBase) -> None:
        super().__init__(base)
        # The groups whose last take in this process granted less than it asked: a select carrying ends in one of
        # them ends first, as it would after taking short (transitions.py).
        self.short: set[str] = set()
        # On a Redis Cluster a script's keys share one slot, and each group's are in a slot of their own.
        self._call_per_group = isinstance(base.redis, RedisCluster)
        self._keys: dict[str, GroupKeys] = {}
        # A reservation's name, unique among every process's: this process's random name and a count (a uuid4 per
        # select cost 1.7 µs, timeit).
        self._process = secrets.token_hex(8) + "."
        self._reservations = itertools.count()

    def group_keys(self, name: str) -> GroupKeys:
        if (keys := self._keys.get(name)) is None:
            keys = self._keys[name] = GroupKeys(self.prefix, name)
        return keys

    def settled_in_call(self, groups: Sequence[GroupCap]) -> bool:
        """Whether a select takes and settles `groups` in its own script call (select_grouped.lua): on one Redis,
        unless a group has a min_in_flight (then the class order waits on the groups' counts: `preferred_order`)."""
        return not self._call_per_group and all(group.min_in_flight is None for group in groups)

    def in_call(self, classes: Sequence[str], group_of: Mapping[str, GroupCap]) -> GroupsInCall | None:
        """The groups of `classes` (class -> group: `group_of`) for a select or an end to settle in its own call, on
        one Redis; None on a Redis Cluster (each group's keys are in a slot of their own)."""
        if self._call_per_group:
            return None
        number: dict[GroupCap, int] = {}
        of_class = [0 if (group := group_of.get(sc)) is None else number.setdefault(group, len(number) + 1) for sc in classes]
        keys = [key for group in number for key in self.group_keys(group.name).all]
        return GroupsInCall(keys, of_class, [group.max_in_flight or 0 for group in number])

    def _calls(self, items: Sequence[T]) -> list[Sequence[T]]:
        """`items` (of one group each) split into script calls: a call per group on a Redis Cluster, one for all on
        one Redis."""
        if self._call_per_group:
            return [[item] for item in items]
        return [items] if items else []

    async def take_slots(self, groups: Sequence[GroupCap], want: int, hold_ms: int) -> list[Grant]:
        """Up to `want` slots of each group for one select, reserved for `hold_ms`."""
        reservation = f"{self._process}{next(self._reservations)}"

        async def take(part: Sequence[GroupCap]) -> list[Grant]:
            keys = [key for group in part for key in self.group_keys(group.name).all]
            caps = [group.max_in_flight or 0 for group in part]
            flat = await self.scripts.run(specs.GROUP_TAKE([], [want, reservation, hold_ms], key_groups=[keys], arg_groups=[caps]))
            grants = [Grant(group, reservation, int(flat[2 * i]), int(flat[2 * i + 1])) for i, group in enumerate(part)]
            for grant in grants:
                if grant.granted < want:
                    self.short.add(grant.group.name)
                else:
                    self.short.discard(grant.group.name)
            return grants

        return await _each(take, self._calls(groups))

    async def settle(self, settlements: Sequence[Settlement]) -> list[int]:
        """Groups' slots settled (Settlement); returns each group's count after, in order."""

        async def run(part: Sequence[Settlement]) -> list[int]:
            keys = [key for s in part for key in self.group_keys(s.group.name).all]
            args = [v for s in part for v in (s.reservation, s.slots, s.group.max_in_flight or 0, len(s.hold), len(s.release), s.short)]
            members = [member for s in part for member in (*s.hold, *s.release)]
            return [
                int(count) for count in await self.scripts.run(specs.GROUP_SETTLE([], [], key_groups=[keys], arg_groups=[args, members]))
            ]

        return await _each(run, self._calls(settlements))

    async def settle_slots(self, group: GroupCap, reservation: str, slots: int, hold: Sequence[str], release: Sequence[str] = ()) -> int:
        """One group's slots settled (Settlement); returns its count after."""
        (count,) = await self.settle([Settlement(group, reservation, slots, hold, release)])
        return count

    async def settle_all(
        self,
        grants: Sequence[Grant],
        taken: Mapping[GroupCap, Sequence[str]],
        freed: Mapping[GroupCap, Sequence[str]],
        short: Mapping[GroupCap, str] | None = None,
    ) -> None:
        """One select's grants settled: each group holds the members `taken` in it, gives back the rest of its
        reservation and frees the members of its requests the select ended (`freed`); the select's notify channel is
        listed by the groups it was `short` of (Settlement)."""
        short = short or {}
        await self.settle(
            [
                Settlement(g.group, g.reservation, g.granted, taken.get(g.group, ()), freed.get(g.group, ()), short.get(g.group, ""))
                for g in grants
            ]
        )

    async def release_ended(self, k: AeKeys, groups: Mapping[str, GroupCap], records: Iterable[RequestMeta]) -> None:
        """The slots of ended requests (their work records) freed, in their groups."""
        await self.settle([Settlement(group, release=members) for group, members in ended_members(k, groups, records).items()])

    async def held_members(self, name: str, before_ms: int | None = None) -> list[str]:
        """A group's held members; with `before_ms`, those held (or last found in flight) before then, by Redis's
        clock (a held member's score)."""
        held = self.group_keys(name).held
        if before_ms is None:
            return cast(list[str], await self.redis.zrange(held, 0, -1))
        return cast(list[str], await self.redis.zrangebyscore(held, "-inf", before_ms))

    async def found_in_flight(self, name: str, members: Sequence[str], now_ms: int) -> None:
        """Held members found still in flight, stamped `now_ms`, so that the pass reads them again only once they
        are as old again (XX: one freed meanwhile stays freed)."""
        if members:
            await self.redis.zadd(self.group_keys(name).held, dict.fromkeys(members, now_ms), xx=True)

    async def stale_members(self, members: Sequence[str]) -> list[str]:
        """Of a group's held members, those no longer selected or begun in that delivery of that life: ended (an
        end whose release was lost), given back, or gone with their environment."""
        by_place: dict[AeKeys, list[tuple[str, str, int, int]]] = {}
        stale = []
        for member in members:
            token, life_digits, deliveries_digits = member.rsplit("|", 2)
            parsed = parse_token(token)
            if parsed is None or not life_digits.isdigit() or not deliveries_digits.isdigit():
                stale.append(member)
                continue
            node, ae, request_id = parsed
            by_place.setdefault(self.base.keys(node, ae), []).append((member, request_id, int(life_digits), int(deliveries_digits)))
        for k, held in by_place.items():
            raws = cast(list[str | None], await self.redis.hmget(k.req, [request_id for _, request_id, _, _ in held]))
            for (member, _, life, deliveries), raw in zip(held, raws, strict=True):
                meta = RequestMeta.from_json(raw) if raw is not None else None
                held_still = (
                    meta is not None
                    and meta.state in (RequestState.SELECTED, RequestState.BEGUN)
                    and meta.life == life
                    and meta.deliveries == deliveries
                )
                if not held_still:
                    stale.append(member)
        return stale

    async def unheld_members(self, k: AeKeys, groups: Mapping[str, GroupCap]) -> dict[GroupCap, list[str]]:
        """Of an environment's requests selected or begun in the classes of `groups` (class -> group), the members
        their groups do not hold: taken by a select whose settle was lost with its process (its reservation counts
        them only until it lapses), or in a settle still under way (holding those again is harmless)."""
        ids = cast(list[str], await self.redis.zrange(k.leases, 0, -1))
        found: dict[GroupCap, list[str]] = {}
        for start in range(0, len(ids), READ_CHUNK):
            chunk = ids[start : start + READ_CHUNK]
            for request_id, raw in zip(chunk, cast(list[str | None], await self.redis.hmget(k.req, chunk)), strict=True):
                meta = RequestMeta.from_json(raw) if raw is not None else None
                if meta is not None and meta.state in (RequestState.SELECTED, RequestState.BEGUN):
                    if (group := groups.get(meta.service_class)) is not None:
                        found.setdefault(group, []).append(member_of(k, request_id, meta))
        unheld = {}
        for group, members in found.items():
            scores = await self.redis.zmscore(self.group_keys(group.name).held, members)
            if missing := [member for member, score in zip(members, scores, strict=True) if score is None]:
                unheld[group] = missing
        return unheld

    async def figures(self, groups: Sequence[GroupCap]) -> list[GroupFigures]:
        """Each group's count and time on its cap, read in one round trip (by Redis's clock)."""
        now_ms = await self.base.clock_ms()
        async with self.redis.pipeline(transaction=False) as pipe:
            for group in groups:
                keys = self.group_keys(group.name)
                pipe.zcard(keys.held)
                pipe.zrangebyscore(keys.reserved, "-inf", now_ms)  # lapsed, still in the sum until a take drops them
                pipe.hmget(keys.capped, ["since", "total_ms", "reserved"])
            replies = await pipe.execute() if groups else []
        figures = []
        for i in range(len(groups)):
            held, lapsed, (since, total, reserved) = replies[3 * i : 3 * i + 3]
            waiting = now_ms - int(since) if since is not None else 0
            # One member per reservation, their sum in `reserved` (reserved_slots in lua/includes/groups.lua).
            slots = int(reserved or 0) - sum(int(member.rsplit(":", 1)[1]) for member in lapsed)
            figures.append(GroupFigures(int(held) + slots, int(total or 0) + max(0, waiting)))
        return figures
