"""The order in which a select takes an environment's queued work (pure): the rule the select script applies in
Redis (app/queues/lua/includes/select_work.lua, promotion.lua; a group's slots as group_take.lua grants them),
stated as plain functions for the what-if simulation. The service orders the classes by `preferred_order`; the
rest runs in Lua, and tests/queues/test_select_conformance.py holds the script and `select` to the same choices.

The rule, for a server wanting up to `want` requests:
1. **Classes**: most important first (their tier: the importance rank; `class_order`), a class whose resource group is under its
   min_in_flight before the other classes of its importance (`preferred_order`), and the server's home class first
   among the classes of its tier (`look_order`): a home never goes before a more important class.
2. **Resource groups**: each group grants a select up to `want` slots within its max_in_flight (`granted_slots`); a
   class takes no more than its group has left, and one whose group has none left is passed over.
3. **Within a class**: dependent work before independent, each first in, first out.
4. **No work starved**: when the promotion bucket holds a token and is due, one request of the class whose oldest
   queued request has waited longest past the promotion time (of the classes after the first with work, whose group
   has a slot) is taken first, marked promoted; then the order above. A promotion spends a token; each request
   selected adds `share` of one, up to 1; a look that promotes nothing is not repeated until its oldest head is due.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from spark_jobs.contract.goals import SYSOTHER
from spark_jobs.manager.servers import DISCRETIONARY_RANK

# Tokens add up in binary fractions: 0.1 added ten times is a hair under 1 (promotion.lua's TOKEN_SLACK).
TOKEN_SLACK = 1e-9


def importance_rank(importance: int | None, discretionary: bool) -> int:
    """A class's tier, from its first period: its importance; discretionary work, or work of no importance, below 5."""
    return DISCRETIONARY_RANK if discretionary or importance is None else importance


def class_order(ranks: Mapping[str, int]) -> tuple[str, ...]:
    """The policy's service classes (name -> importance rank) most important first, by name among equals, SYSOTHER
    last: the order a select starts from."""
    return tuple(sorted(ranks, key=lambda name: (name == SYSOTHER, ranks[name], name)))


@dataclass(frozen=True, slots=True)
class RankedClass:
    """A service class of the environment, in the policy's class order: its importance rank and resource group."""

    name: str
    tier: int
    group: str | None = None


def preferred_order(classes: Sequence[RankedClass], under_min: Collection[str]) -> list[tuple[str, int]]:
    """The classes in the order a select looks at them, each with its tier: most important first, as the policy
    orders them, except that a class whose group is in `under_min` (fewer in flight than its min_in_flight) comes
    before the other classes of equal importance (and so before every less important one), in a tier of its own."""
    ranked = [
        (2 * c.tier + (0 if c.group is not None and c.group in under_min else 1), position, c.name) for position, c in enumerate(classes)
    ]
    return [(name, tier) for tier, _, name in sorted(ranked)]


def look_order(order: Sequence[tuple[str, int]], home: str | None) -> list[str]:
    """The classes of `order` (with their tiers, equal tiers adjacent) as a server of home class `home` looks at them:
    its home first among the classes of its tier."""
    looked: list[str] = []
    tier_start = 0
    for position, (name, tier) in enumerate(order):
        if position > 0 and tier != order[position - 1][1]:
            tier_start = position
        if name == home:
            looked.insert(tier_start, name)
        else:
            looked.append(name)
    return looked


def granted_slots(want: int, max_in_flight: int | None, in_flight: int) -> int:
    """The slots a resource group grants a select wanting `want`: all without a cap, else what the cap leaves."""
    return want if max_in_flight is None else max(0, min(want, max_in_flight - in_flight))


# What a select is given, as NamedTuples: the what-if gives a few per request of a day of millions, and a frozen
# dataclass costs several times as much to make.
class Queued(NamedTuple):
    """A class's queued work as a select finds it: how many of each kind, and when the oldest at the head of either
    queue was inserted (None: nothing queued)."""

    dependent: int = 0
    independent: int = 0
    oldest_ms: float | None = None


class PromotionBucket(NamedTuple):
    """The environment's promotion token bucket (the select script's `{…}:promotion`): full, due at once, at first."""

    tokens: float = 1.0
    due_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Promotion:
    after_ms: float  # the promotion time (WLM_BLOCKED_PROMOTION_SECONDS)
    share: float  # of a token per request selected (WLM_BLOCKED_PROMOTION_SHARE)


@dataclass(frozen=True, slots=True)
class Take:
    """`count` requests from the front of one queue of `service_class`."""

    service_class: str
    dependent: bool
    count: int
    promoted: bool = False


@dataclass(frozen=True, slots=True)
class Selection:
    takes: tuple[Take, ...]  # in the order taken
    bucket: PromotionBucket  # after the select

    @property
    def count(self) -> int:
        return sum(take.count for take in self.takes)


def select(
    order: Sequence[str],
    queued: Mapping[str, Queued],
    *,
    want: int,
    now_ms: float,
    bucket: PromotionBucket,
    promotion: Promotion,
    group_of: Mapping[str, str] | None = None,
    slots: Mapping[str, int] | None = None,
) -> Selection:
    """What a select takes: `order` the classes as the server looks at them (`look_order`), `queued` each class's
    queued work, `want` the most it takes, `group_of` each grouped class's group and `slots` what each group granted
    (`granted_slots`)."""
    group_of = group_of or {}
    left = dict(slots) if slots else {}
    takes: list[Take] = []
    got = 0  # requests taken so far
    promoted: Take | None = None
    starved, due_ms = (
        _starved(order, queued, group_of, left, bucket, now_ms, promotion.after_ms) if due(bucket, now_ms) else (None, bucket.due_ms)
    )
    tokens = bucket.tokens
    if starved is not None:
        got = _take_class(takes, starved, queued[starved], 1, got, group_of.get(starved), left, None)
        promoted = takes[-1] = replace(takes[-1], promoted=True)
        tokens -= 1
    for name in order:
        if got >= want:
            break
        work = queued.get(name)
        if work is not None:
            got = _take_class(takes, name, work, want, got, group_of.get(name), left, promoted if name == starved else None)
    return Selection(tuple(takes), PromotionBucket(min(1.0, tokens + promotion.share * got), due_ms))


def _take_class(
    takes: list[Take], name: str, work: Queued, limit: int, got: int, group: str | None, left: dict[str, int], before: Take | None
) -> int:
    """Take up to `limit` in all (`got` so far) of class `name`, dependent work first, within its group's slots left
    (`left`, spent); `before`: what a promotion took of it already. Returns the count taken in all."""
    if group is not None:
        limit = min(limit, got + left[group])
    for dependent, count in ((True, work.dependent), (False, work.independent)):
        if before is not None and before.dependent == dependent:
            count -= before.count
        n = min(limit - got, count)
        if n > 0:
            takes.append(Take(name, dependent, n))
            got += n
            if group is not None:
                left[group] -= n
    return got


def due(bucket: PromotionBucket, now_ms: float) -> bool:
    """Whether a select at `now_ms` looks for starved work: the bucket holds a token and is due. A select that takes
    nothing and does not look changes nothing."""
    return bucket.tokens + TOKEN_SLACK >= 1 and now_ms >= bucket.due_ms


def _starved(
    order: Sequence[str],
    queued: Mapping[str, Queued],
    group_of: Mapping[str, str],
    left: Mapping[str, int],
    bucket: PromotionBucket,
    now_ms: float,
    after_ms: float,
) -> tuple[str | None, float]:
    """The class to promote, if any, and when the bucket is next due (promotion.lua's starved_class), of a bucket
    that is `due`."""
    chosen: str | None = None
    oldest: float | None = None
    first_with_work: str | None = None
    due_ms = now_ms + after_ms
    for name in order:
        group = group_of.get(name)
        if group is not None and left[group] <= 0:
            continue
        inserted = queued[name].oldest_ms if name in queued else None
        if inserted is None:
            continue
        if first_with_work is None:
            first_with_work = name
        elif inserted + after_ms > now_ms:
            due_ms = min(due_ms, inserted + after_ms)
        elif oldest is None or inserted < oldest:
            chosen, oldest = name, inserted
    # The promoted class may hold more such requests: look again as soon as a token is back.
    return chosen, now_ms if chosen is not None else due_ms
