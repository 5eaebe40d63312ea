"""Begin (IWM4STBG) and end (IWM4STEN) by the server that selected a request, and delete (IWM4QDE) by its queue
manager while it is still queued. Ending many at once is shared with select, which ends before it selects."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from app.auth.roles import PrincipalInfo
from app.config import Settings
from app.connections.service import ConnInfo
from app.errors import AppError, Conflict, NotFound, PayloadTooLarge, lua_error
from app.policy.service import PolicyStore
from app.queues.base import GroupCap
from app.queues.codes import ReturnCode
from app.queues.keys import AeKeys, parse_held_token, parse_token
from app.queues.resource_groups import group_by_class
from app.queues.store import QueueStore
from app.queues.transitions import EndArgs, EndResult
from app.work.call_context import CallerConnections, json_bytes
from app.work.schemas import EndedOut, EndErrorOut, EndIn

EndRequestArgs = tuple[str, EndIn]  # work token, how it ended
# Each end's error where it is refused before reaching the queues (None for the others).
PreparedOutcomes = list[EndedOut | AppError | None]


@dataclass(frozen=True, slots=True)
class Ending:
    connections: CallerConnections
    store: QueueStore
    policies: PolicyStore
    settings: Settings

    async def begin(self, principal: PrincipalInfo, token: str, connect_token: str) -> tuple[str, datetime]:
        server = await self.connections.of(principal, connect_token, "server")
        keys, request_id, life = self._held_keys(server, token)
        policy = await self.policies.knowing(keys.ae)
        config = policy.queue_config(keys.ae)
        if config is None:
            raise Conflict("the application environment is no longer in the active policy", code="unknown_application_environment")
        lease_ends_ms = await self.store.begin(keys, config, request_id, server.id, life)
        return token, datetime.fromtimestamp(lease_ends_ms / 1000, UTC)

    async def end(self, principal: PrincipalInfo, token: str, connect_token: str, end: EndIn) -> EndedOut:
        server = await self.connections.of(principal, connect_token, "server")
        (ended,) = await self.end_many(server, [(token, end)])
        if isinstance(ended, AppError):
            raise ended
        return ended

    async def delete(self, principal: PrincipalInfo, token: str, connect_token: str) -> None:
        qm = await self.connections.of(principal, connect_token, "queue_manager")
        parsed = parse_token(token)
        if parsed is None:
            raise NotFound("no such work request", code="unknown_work")
        node, ae, request_id = parsed
        await self.store.delete(self.store.keys(node, ae), request_id, qm.id)

    async def end_many(self, server: ConnInfo, ends: list[EndRequestArgs]) -> list[EndedOut | AppError]:
        """End requests in one script call; each ends, or fails with its own error."""
        outcomes, valid = self.prepare(server, ends)
        done: list[EndResult] = []
        if valid:
            assert server.node and server.application_environment
            keys = self.store.keys(server.node, server.application_environment)
            done = await self.store.end(keys, server.id, [v for _, v in valid], await self._groups(server.application_environment))
        return settle(ends, outcomes, valid, done)

    async def _groups(self, ae: str) -> dict[str, GroupCap] | None:
        """The environment's classes in resource groups (class -> group), whose ends free a slot; None if none."""
        policy = await self.policies.current()
        config = policy.queue_config(ae) if policy is not None else None
        return group_by_class(config) if config is not None and config.class_groups else None

    def prepare(self, server: ConnInfo, ends: list[EndRequestArgs]) -> tuple[PreparedOutcomes, list[tuple[int, EndArgs]]]:
        """Each end's error where it is refused before reaching the queues, and the script arguments of the others
        with their index."""
        outcomes: PreparedOutcomes = [None] * len(ends)
        valid: list[tuple[int, EndArgs]] = []
        for i, (token, end) in enumerate(ends):
            try:
                _, request_id, life = self._held_keys(server, token)
                valid.append((i, EndArgs(request_id, end.outcome, self._result_text(end.result), end.error, end.dead_letter, life)))
            except AppError as exc:
                outcomes[i] = exc
        return outcomes, valid

    def _result_text(self, result: Any) -> str | None:
        if result is None:
            return None
        encoded = json_bytes(result, "result")
        if len(encoded) > self.settings.max_result_bytes:
            raise PayloadTooLarge(f"the result has {len(encoded)} bytes; at most {self.settings.max_result_bytes}", path="result")
        return encoded.decode()

    def _held_keys(self, server: ConnInfo, token: str) -> tuple[AeKeys, str, int]:
        """The queues, id and life a server's token names."""
        parsed = parse_held_token(token)
        if parsed is None:
            raise NotFound("no such work request", code="unknown_work")
        node, ae, request_id, life = parsed
        if (node, ae) != (server.node, server.application_environment):
            raise Conflict("the work request is not held by this server (never selected by it, or reassigned)", code="not_holder")
        return self.store.keys(node, ae), request_id, life


def settle(
    ends: list[EndRequestArgs], outcomes: PreparedOutcomes, valid: list[tuple[int, EndArgs]], done: list[EndResult]
) -> list[EndedOut | AppError]:
    """Every end's outcome: the errors of `prepare`, and what the script did with the others."""
    for (i, _), result in zip(valid, done, strict=True):
        if result.code is ReturnCode.OK:
            record = result.record
            outcomes[i] = EndedOut(token=ends[i][0], outcome=record.outcome, response_time_ms=record.ended - record.inserted)
        else:
            outcomes[i] = lua_error(result.code, [result.value])
    return cast(list[EndedOut | AppError], outcomes)  # prepare left None only at the indexes of `valid`, filled above


def split_outcomes(ends: list[EndRequestArgs], outcomes: list[EndedOut | AppError]) -> tuple[list[EndedOut], list[EndErrorOut]]:
    ended = [o for o in outcomes if isinstance(o, EndedOut)]
    errors = [
        EndErrorOut(token=e[0], code=o.code, message=o.message) for e, o in zip(ends, outcomes, strict=True) if isinstance(o, AppError)
    ]
    return ended, errors
