"""Dead letters as operators see them: listed in the order they died across every environment and node of the
policy (or those a filter names), looked at, retried (queued again under the same token) and discarded, each
retry and discard audited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import record
from app.dead_letters.schemas import BulkIn, BulkOut, DeadLetterFilter, DeadLetterOut, RetriedOut
from app.errors import BadRequest, NotFound
from app.policy.active import ActivePolicy
from app.policy.service import PolicyStore
from app.queues.dead_letters import DeadLetter, Position
from app.queues.keys import AeKeys, parse_token
from app.queues.store import QueueStore

RETRY_ACTION = "dead_letter.retry"
DISCARD_ACTION = "dead_letter.discard"
# Dead letters read per Redis call while a place is searched for those a filter matches.
SCAN_PAGE = 200
# A bulk retry or discard acts on this many dead letters per step, and names at most this many in its audit event.
BULK_PAGE = 500
# Past any token: every dead letter of a millisecond sorts before it.
_PAST_ANY = "\U0010ffff"

Cursor = tuple[int, str]  # died ms, token: the order dead letters are listed in


@dataclass(frozen=True, slots=True)
class Found:
    keys: AeKeys
    letter: DeadLetter

    @property
    def token(self) -> str:
        return self.keys.token(self.letter.id)

    @property
    def position(self) -> Cursor:
        return self.letter.died_ms, self.token


def parse_cursor(text: str | None) -> Cursor | None:
    if text is None:
        return None
    died, _, token = text.partition("_")
    if not (died.isascii() and died.isdigit()) or parse_token(token) is None:
        raise BadRequest("not a cursor this list gave", code="invalid_cursor", path="cursor")
    return int(died), token


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def letter_out(found: Found, *, with_payload: bool) -> DeadLetterOut:
    meta, keys = found.letter.meta, found.keys
    selected = meta.selected
    return DeadLetterOut(
        token=found.token,
        application_environment=keys.ae,
        node=keys.node,
        service_class=meta.service_class,
        report_class=meta.report_class,
        dependent=meta.dependent,
        reason=found.letter.reason,
        deliveries=meta.deliveries,
        last_server_id=meta.server_id,
        error=meta.error,
        userid=meta.userid,
        queue_manager_id=meta.queue_manager,
        life=meta.life,
        inserted_at=_at(meta.inserted),
        first_inserted_at=_at(meta.first_inserted or meta.inserted),
        selected_at=None if selected is None else _at(selected),
        died_at=_at(found.letter.died_ms),
        payload=orjson.loads(found.letter.payload) if with_payload else None,
    )


class DeadLetterService:
    def __init__(self, queues: QueueStore, policies: PolicyStore) -> None:
        self.queues = queues
        self.policies = policies

    async def page(self, wanted: DeadLetterFilter, limit: int, cursor: Cursor | None) -> tuple[list[Found], Cursor | None]:
        """Up to `limit` dead letters `wanted` matches, in the order they died, after `cursor`, across the active
        policy's environments and nodes; and the cursor of the next page (None: there is none)."""
        policy = await self.policies.current()
        return ([], None) if policy is None else await self._page(policy, wanted, limit, cursor)

    async def retry_matching(self, session: AsyncSession, actor: str, wanted: BulkIn, position: Position) -> BulkOut:
        """Each matching dead letter queued again (one script call each: a dead letter another caller retries at the
        same time is queued once, by one of them)."""
        matched, tokens = 0, []
        async for page in self._matching(wanted):
            matched += len(page)
            for found in page:
                try:
                    await self.queues.dead_letters.retry(found.keys, found.letter.id, position)
                except NotFound:
                    continue
                tokens.append(found.token)
        return await self._audited(session, actor, RETRY_ACTION, wanted, matched, tokens, position=position)

    async def discard_matching(self, session: AsyncSession, actor: str, wanted: BulkIn) -> BulkOut:
        matched, tokens = 0, []
        async for page in self._matching(wanted):
            matched += len(page)
            by_place: dict[AeKeys, list[str]] = {}
            for found in page:
                by_place.setdefault(found.keys, []).append(found.letter.id)
            for keys, ids in by_place.items():
                tokens += [keys.token(request_id) for request_id in await self.queues.dead_letters.discard(keys, ids)]
        return await self._audited(session, actor, DISCARD_ACTION, wanted, matched, tokens)

    def _places(self, policy: ActivePolicy, wanted: DeadLetterFilter) -> list[AeKeys]:
        return [
            self.queues.keys(node, ae)
            for ae in sorted(policy.application_environments)
            if wanted.application_environment in (None, ae)
            for node in policy.nodes
            if wanted.node in (None, node) and policy.hosts(ae, node)
        ]

    def _keys_of(self, token: str) -> tuple[AeKeys, str]:
        parsed = parse_token(token)
        if parsed is None:
            raise NotFound("no such dead letter", code="unknown_dead_letter")
        node, ae, request_id = parsed
        return self.queues.keys(node, ae), request_id

    async def show(self, token: str) -> DeadLetterOut:
        keys, request_id = self._keys_of(token)
        letter = await self.queues.dead_letters.get(keys, request_id)
        if letter is None:
            raise NotFound("no such dead letter (it may have been retried, discarded or expired)", code="unknown_dead_letter")
        return letter_out(Found(keys, letter), with_payload=True)

    async def _page(
        self, policy: ActivePolicy, wanted: DeadLetterFilter, limit: int, cursor: Cursor | None
    ) -> tuple[list[Found], Cursor | None]:
        after = cursor
        since = _ms(wanted.since)
        if since is not None and (after is None or after < (since - 1, _PAST_ANY)):
            after = (since - 1, _PAST_ANY)
        found: list[Found] = []
        more = False
        for keys in self._places(policy, wanted):
            matched, place_has_more = await self._place_page(keys, wanted, after, limit)
            found += matched
            more = more or place_has_more
        found.sort(key=lambda f: f.position)
        more = more or len(found) > limit
        found = found[:limit]
        return found, (found[-1].position if more and found else None)

    async def _place_page(self, keys: AeKeys, wanted: DeadLetterFilter, after: Cursor | None, limit: int) -> tuple[list[Found], bool]:
        """Up to `limit` dead letters of one place that `wanted` matches, after `after`, and whether it may have more."""
        place_after = _place_after(after, keys.token(""))
        matched: list[Found] = []
        while True:
            page = await self.queues.dead_letters.page(keys, place_after, _ms(wanted.until), SCAN_PAGE)
            for letter in page.letters:
                if wanted.service_class in (None, letter.meta.service_class) and wanted.reason in (None, letter.reason):
                    matched.append(Found(keys, letter))
                    if len(matched) == limit:
                        return matched, True
            if page.last is None:
                return matched, False
            place_after = page.last

    async def _matching(self, wanted: DeadLetterFilter) -> AsyncIterator[list[Found]]:
        """Every dead letter `wanted` matches, a page at a time (a bulk action's pages)."""
        cursor: Cursor | None = None
        while True:
            found, cursor = await self.page(wanted, BULK_PAGE, cursor)
            if found:
                yield found
            if cursor is None:
                return

    async def retry(self, session: AsyncSession, actor: str, token: str, position: Position) -> RetriedOut:
        keys, request_id = self._keys_of(token)
        meta = await self.queues.dead_letters.retry(keys, request_id, position)
        record(session, actor, RETRY_ACTION, token, position=position, life=meta.life)
        await session.commit()
        return RetriedOut(token=token, service_class=meta.service_class, position=position, life=meta.life)

    async def discard(self, session: AsyncSession, actor: str, token: str) -> None:
        keys, request_id = self._keys_of(token)
        if not await self.queues.dead_letters.discard(keys, [request_id]):
            raise NotFound("no such dead letter (it may have been retried, discarded or expired)", code="unknown_dead_letter")
        record(session, actor, DISCARD_ACTION, token)
        await session.commit()

    async def _audited(
        self, session: AsyncSession, actor: str, action: str, wanted: BulkIn, matched: int, tokens: list[str], **detail: str
    ) -> BulkOut:
        """One audit event for a bulk action: its filter, counts and (up to BULK_PAGE of) the tokens it acted on."""
        target = wanted.application_environment or "*"
        record(
            session, actor, action, target, **detail, filter=wanted.model_dump(mode="json", exclude_none=True),
            matched=matched, done=len(tokens), tokens=tokens[:BULK_PAGE],
        )  # fmt: skip
        await session.commit()
        return BulkOut(matched=matched, done=len(tokens), tokens=tokens)


def _place_after(after: Cursor | None, token_prefix: str) -> tuple[int, str] | None:
    """`after` (died ms, token) as the (died ms, id) of one place whose tokens are `token_prefix` + id: the same
    dead letters of that place come after both."""
    if after is None:
        return None
    died, token = after
    if token.startswith(token_prefix):
        return died, token[len(token_prefix) :]
    # No id of this place starts the same as the token: all of the millisecond come before it, or all after.
    return (died, "") if token_prefix > token else (died, _PAST_ANY)
