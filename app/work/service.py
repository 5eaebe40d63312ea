"""The work lifecycle over the queues: enclaves, insert, select (long poll), begin, end, delete."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.roles import PrincipalInfo
from app.config import Settings
from app.connections.service import ConnectionCache, ConnInfo, active_connection
from app.errors import (
    AppError,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    TooManyRequests,
    ValidationFailed,
    lua_error,
)
from app.operator.service import OperatorStore
from app.operator.states import AEState, servers_must_end
from app.policy.active import ActivePolicy
from app.policy.service import PolicyStore, qualifier_attributes
from app.queues.keys import AeKeys, enclave_key, idempotency_route_key, parse_token
from app.queues.store import AeConfig, EndArgs, EndResult, NewRequest, QueueStore, Selected
from app.routing.service import Router, count_routed
from app.scheduler.advisories import publish, subject
from app.work.dispatch import POLL_FALLBACK_SECONDS, Dispatcher, Waiter
from app.work.schemas import (
    EnclaveIn,
    EnclaveOut,
    EndedOut,
    EndErrorOut,
    SelectIn,
    SelectOut,
    WorkBatchIn,
    WorkIn,
    WorkItemIn,
    WorkItemOut,
    WorkQueued,
)

ENCLAVE_PREFIX = "e_"
EndRequestArgs = tuple[str, str, Any]  # work token, outcome, result (any JSON value)
# IWM4SSL's return: the server is not needed any more (its environment left the policy, or was quiesced,
# refreshed, or has surplus servers); it should end what it holds, disconnect and stop.
TERMINATE_REASON = "0C14"


# When this process last announced a class queue at its backlog limit: at most one advisory a second for each.
_BACKLOG_ADVISED: dict[tuple[str, str, str], float] = {}
BACKLOG_ADVISORY_SECONDS = 1.0


async def _advise_backlog_limit(store: QueueStore, ae: str, node: str, details: dict[str, Any]) -> None:
    """The seed's "task backlog limit reached", once a second per class queue however many inserts it refuses."""
    queue = (ae, node, str(details.get("service_class")))
    if time.monotonic() - _BACKLOG_ADVISED.get(queue, -BACKLOG_ADVISORY_SECONDS) < BACKLOG_ADVISORY_SECONDS:
        return
    _BACKLOG_ADVISED[queue] = time.monotonic()
    await publish(store.redis, store.prefix, subject("WLM", "WARN", "QUEUE", "BACKLOG_LIMIT", ae), node=node, **details)


@dataclass
class Work:
    """What the lifecycle operations need of the process: one per request, built by the router."""

    sessions: async_sessionmaker[AsyncSession]
    connections: ConnectionCache
    operator: OperatorStore
    store: QueueStore
    policies: PolicyStore
    dispatcher: Dispatcher
    router: Router
    settings: Settings
    principal: PrincipalInfo

    async def _connection(self, token: str, role: str) -> ConnInfo:
        return await active_connection(self.sessions, self.store, self.connections, self.principal, token, role)

    # ---- enclaves (IWM4ECRE) -----------------------------------------------------------------------------

    async def create_enclave(self, body: EnclaveIn) -> EnclaveOut:
        qm = await self._connection(body.connect_token, "queue_manager")
        policy = await self.policies.active()
        if body.parent is not None:
            parent = await self._enclave(qm, body.parent)
            enclave = {**parent, "dep": True, "parent": body.parent}
        else:
            result = policy.classify(qm.subsystem_type, qualifier_attributes(body.classification, path="classification"))
            enclave = {"sc": result.service_class, "rc": result.report_class, "dep": False, "qm": qm.id, "policy": policy.version}
        enclave_id = secrets.token_urlsafe(16)
        ttl = self.settings.enclave_ttl_seconds
        await self.store.redis.set(enclave_key(self.store.prefix, enclave_id), json.dumps(enclave), ex=ttl)
        return EnclaveOut(
            token=ENCLAVE_PREFIX + enclave_id,
            service_class=enclave["sc"],
            report_class=enclave["rc"],
            dependent=enclave["dep"],
            policy_version=enclave["policy"],
            expires_at=datetime.fromtimestamp(time.time() + ttl, UTC),
        )

    async def delete_enclave(self, token: str, connect_token: str) -> None:
        qm = await self._connection(connect_token, "queue_manager")
        await self._enclave(qm, token)
        await self.store.redis.delete(enclave_key(self.store.prefix, token.removeprefix(ENCLAVE_PREFIX)))

    async def _enclave(self, qm: ConnInfo, token: str) -> dict[str, Any]:
        raw = (
            await self.store.redis.get(enclave_key(self.store.prefix, token.removeprefix(ENCLAVE_PREFIX)))
            if token.startswith(ENCLAVE_PREFIX)
            else None
        )
        enclave = json.loads(raw) if raw else None
        if enclave is None or enclave["qm"] != qm.id:
            raise NotFound("unknown or expired enclave token", code="unknown_enclave")
        return enclave  # type: ignore[no-any-return]

    # ---- queue insert (IWM4QIN) --------------------------------------------------------------------------

    async def insert(self, body: WorkIn) -> tuple[WorkQueued, bool]:
        """Returns the queued request and whether it was a replay of an earlier insert (idempotency key)."""
        # WorkIn is a WorkItemIn, already validated: one-item batch without validating it again.
        batch = WorkBatchIn.model_construct(
            connect_token=body.connect_token, application_environment=body.application_environment, node=body.node, items=[body]
        )
        queued, replayed = await self.insert_batch(batch, item_paths=False)
        return queued[0], replayed[0]

    async def insert_batch(self, body: WorkBatchIn, *, item_paths: bool = True) -> tuple[list[WorkQueued], list[bool]]:
        """All or none (one script on one slot). Error paths name the item (`items[3].payload`) unless
        `item_paths` is off for the single-request form."""
        if len(body.items) > self.settings.max_batch_items:
            raise ValidationFailed([{"path": "items", "message": f"at most {self.settings.max_batch_items} items"}])
        qm = await self._connection(body.connect_token, "queue_manager")
        policy = await self.policies.knowing(body.application_environment)
        ae = policy.application_environments.get(body.application_environment)
        if ae is None:
            known = ", ".join(policy.application_environments) or "none"
            raise ValidationFailed(
                [
                    {
                        "path": "application_environment",
                        "message": f"unknown application environment {body.application_environment!r}; defined: {known}",
                    }
                ]
            )
        if ae.subsystem_type != qm.subsystem_type:
            raise ValidationFailed(
                [
                    {
                        "path": "application_environment",
                        "message": f"{ae.name} serves subsystem type {ae.subsystem_type}; this queue manager is {qm.subsystem_type}",
                    }
                ]
            )
        owner = policy.dynamic.get(ae.name)
        if owner is not None and owner.queue_manager_id != qm.id:
            raise Forbidden(f"{ae.name} is a dynamic application environment of another queue manager", code="outside_scope")
        node, how = await self._node_for(policy, ae.name, body.node, qm, body.items)
        keys = self.store.keys(node, ae.name)
        seen_keys: set[str] = set()
        requests, classes = [], []
        for i, item in enumerate(body.items):
            path = f"items[{i}]." if item_paths else ""
            request = await self._new_request(policy, qm, node, ae.name, item, path)
            if item.idempotency_key:
                if item.idempotency_key in seen_keys:
                    raise ValidationFailed([{"path": f"{path}idempotency_key", "message": "repeated within the batch"}])
                seen_keys.add(item.idempotency_key)
            requests.append(request)
            classes.append((request.service_class, request.meta["rc"]))
        try:
            ids = await self.store.insert(keys, qm.id, requests, ae.backlog_limit)
        except TooManyRequests as exc:
            await _advise_backlog_limit(self.store, ae.name, node, exc.details)
            raise
        count_routed(ae.name, node, how, len(requests))
        queued, replayed = [], []
        for request, request_id, (sc, rc) in zip(requests, ids, classes, strict=True):
            replayed.append(request_id != request.id)
            queued.append(
                WorkQueued(token=keys.token(request_id), application_environment=ae.name, node=node, service_class=sc, report_class=rc)
            )
        return queued, replayed

    async def _node_for(self, policy: ActivePolicy, ae: str, requested: str | None, qm: ConnInfo, items: list[WorkItemIn]) -> tuple[str, str]:
        """The node named, else the cluster workload algorithm's choice; and how it was chosen. A retry with an
        idempotency key goes to the node the first try went to, where the key replays it."""
        if requested is not None:
            if not policy.hosts(ae, requested):
                raise ValidationFailed([{"path": "node", "message": f"node {requested} does not host {ae}"}])
            return requested, "named"
        claims = [idempotency_route_key(self.store.prefix, qm.id, ae, item.idempotency_key) for item in items if item.idempotency_key]
        earlier = await self._claimed_node(policy, ae, claims)
        if earlier is not None:
            return earlier, "algorithm"
        node = await self.router.route(policy, ae, qm.node, len(items))
        if claims:
            async with self.store.redis.pipeline(transaction=False) as pipe:
                for claim in claims:
                    pipe.set(claim, node, nx=True, ex=self.settings.idempotency_ttl_seconds)
                await pipe.execute()
            # A concurrent retry of the same request that claimed first wins.
            node = await self._claimed_node(policy, ae, claims) or node
        return node, "algorithm"

    async def _claimed_node(self, policy: ActivePolicy, ae: str, claims: list[str]) -> str | None:
        if not claims:
            return None
        async with self.store.redis.pipeline(transaction=False) as pipe:
            for claim in claims:
                pipe.get(claim)
            nodes = {node for node in await pipe.execute() if node is not None and policy.hosts(ae, node)}
        if len(nodes) > 1:
            raise Conflict(
                f"the idempotency keys of this batch were queued on different nodes ({', '.join(sorted(nodes))}); send those "
                "requests again on their own, or name a node",
                code="idempotency_nodes_differ",
            )
        return nodes.pop() if nodes else None

    async def _new_request(self, policy: ActivePolicy, qm: ConnInfo, node: str, ae: str, item: WorkItemIn, path: str) -> NewRequest:
        if item.enclave_token is not None:
            enclave = await self._enclave(qm, item.enclave_token)
            sc, rc, dependent, version = enclave["sc"], enclave["rc"], enclave["dep"], enclave["policy"]
            if sc not in policy.service_classes:
                raise Conflict(
                    f"the enclave's service class {sc} is no longer in the policy; create a new enclave", code="enclave_class_removed"
                )
        elif item.classification is not None:
            result = policy.classify(qm.subsystem_type, qualifier_attributes(item.classification, path=f"{path}classification"))
            sc, rc, dependent, version = result.service_class, result.report_class, False, policy.version
        else:
            raise ValidationFailed(
                [{"path": f"{path}enclave_token", "message": "give an enclave_token (POST /v1/enclaves) or a classification"}]
            )
        encoded = _json_bytes(item.payload, f"{path}payload")
        if len(encoded) > self.settings.max_payload_bytes:
            raise PayloadTooLarge(
                f"{path}payload has {len(encoded)} bytes; at most {self.settings.max_payload_bytes}", path=f"{path}payload"
            )
        payload = encoded.decode()
        meta = {
            "sc": sc,
            "rc": rc,
            "dep": dependent,
            "qm": qm.id,
            "subsystem_type": qm.subsystem_type,
            "subsystem_name": qm.subsystem_name,
            "userid": item.userid,
            "enclave": item.enclave_token,
            "policy": version,
            "node": node,
            "ae": ae,
            "state": "q",
            "deliveries": 0,
            "exit": qm.exit_url or "",
        }
        return NewRequest(secrets.token_urlsafe(12), sc, dependent, meta, payload, item.idempotency_key)

    # ---- select (IWM4SSL) --------------------------------------------------------------------------------

    async def select(self, body: SelectIn) -> SelectOut | None:
        """Ends what the server asks to end, then work for it, waiting up to `wait_seconds`; None when nothing
        came in time and nothing was ended."""
        server = await self._connection(body.connect_token, "server")
        ends = [(e.token, e.outcome, e.result) for e in body.end]
        assert server.node and server.application_environment
        policy = await self.policies.knowing(server.application_environment)
        config = AeConfig.of(policy, server.application_environment)
        reason = await self._reason_to_end(server, policy) if config is not None else "the application environment is no longer in the active policy"
        if reason is not None:
            ended, end_errors = _split_outcomes(ends, await self._end_many(server, ends))
            return SelectOut(items=[], ended=ended, end_errors=end_errors, terminate=True, reason_code=TERMINATE_REASON, reason=reason)
        assert config is not None
        outcomes, valid = self._prepare_ends(server, ends)
        keys = self.store.keys(server.node, server.application_environment)
        wait = min(body.wait_seconds, self.settings.max_wait_seconds)
        if wait > 0:
            done, items, surplus = await self._wait_and_select(keys, config, server, body, time.monotonic() + wait, [v for _, v in valid])
        else:
            done, items, surplus = await self._try_select(keys, config, server, body, [v for _, v in valid])
        ended, end_errors = _split_outcomes(ends, self._settle_ends(ends, outcomes, valid, done))
        if surplus:
            reason = "the environment has more servers than its goals need (or than its maximum)"
            return SelectOut(items=[], ended=ended, end_errors=end_errors, terminate=True, reason_code=TERMINATE_REASON, reason=reason)
        if not items and not ended and not end_errors:
            return None
        return SelectOut(items=[_item_out(keys, config, s) for s in items], ended=ended, end_errors=end_errors)

    async def _reason_to_end(self, server: ConnInfo, policy: ActivePolicy) -> str | None:
        """Why the operator's state of the server's environment ends it (after what it ends in this call), if it
        does: QUIESCE (and QUIESCED, DELETING) ends every server; REFRESH those connected before it."""
        assert server.application_environment
        state = await self.operator.state_of(server.application_environment, policy)
        if not servers_must_end(state):
            return None
        if state is AEState.REFRESHING:
            record = (await self.operator.states()).get(server.application_environment)
            if record is None or record.refreshed_at is None or server.connected_at >= record.refreshed_at.timestamp():
                return None  # a replacement, started after the refresh
        return f"the application environment is {state}"

    async def _try_select(
        self, keys: AeKeys, config: AeConfig, server: ConnInfo, body: SelectIn, ends: list[EndArgs]
    ) -> tuple[list[EndResult], list[Selected], bool]:
        """What was ended, what was selected, and whether the server is surplus (to end: 0C14)."""
        result = await self.store.select(keys, config, server.id, body.max_items, begin=body.begin, ends=ends)
        if result.refusal is not None:
            if result.refusal.code == "server_surplus":
                return result.ended, [], True
            if result.refusal.code != "overflow_not_needed":
                raise result.refusal
        if result.items:
            self.dispatcher.served(server.id)
        return result.ended, result.items, False

    async def _wait_and_select(
        self, keys: AeKeys, config: AeConfig, server: ConnInfo, body: SelectIn, deadline: float, ends: list[EndArgs]
    ) -> tuple[list[EndResult], list[Selected], bool]:
        """Registered as a waiter before the first attempt (which also ends `ends`), so an insert between the
        attempt and the wait still wakes it."""
        assert server.worker_weight is not None
        waiter = Waiter(keys.node, keys.ae, server.id, server.worker_weight, server.overflow)
        self.dispatcher.register(waiter)
        try:
            ended, items, surplus = await self._try_select(keys, config, server, body, ends)
            if items or surplus:
                return ended, items, surplus
            task = asyncio.current_task()
            while (remaining := deadline - time.monotonic()) > 0 and not self.dispatcher.draining:
                if task is not None and task.cancelling():
                    # The client went away (cancelled), but a library call on the way swallowed the
                    # cancellation (seen with the Redis client): stop waiting for a select nobody awaits.
                    raise asyncio.CancelledError
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that arrives
                # as the event fires, and a cancelled long poll would then wait out its full time.
                try:
                    async with asyncio.timeout(min(remaining, POLL_FALLBACK_SECONDS)):
                        await waiter.event.wait()
                except TimeoutError:
                    pass
                waiter.event.clear()
                _, items, surplus = await self._try_select(keys, config, server, body, [])
                if items or surplus:
                    return ended, items, surplus
            return ended, [], False
        finally:
            self.dispatcher.unregister(waiter)

    # ---- begin, end (IWM4STBG, IWM4STEN) ------------------------------------------------------------------

    async def begin(self, token: str, connect_token: str) -> tuple[str, datetime]:
        server = await self._connection(connect_token, "server")
        keys, request_id = self._held_keys(server, token)
        policy = await self.policies.knowing(keys.ae)
        config = AeConfig.of(policy, keys.ae)
        if config is None:
            raise Conflict("the application environment is no longer in the active policy", code="unknown_application_environment")
        lease_ends_ms = await self.store.begin(keys, config, request_id, server.id)
        return token, datetime.fromtimestamp(lease_ends_ms / 1000, UTC)

    async def end(self, token: str, connect_token: str, outcome: str, result: Any) -> EndedOut:
        server = await self._connection(connect_token, "server")
        (ended,) = await self._end_many(server, [(token, outcome, result)])
        if isinstance(ended, AppError):
            raise ended
        return ended

    async def _end_many(self, server: ConnInfo, ends: list[EndRequestArgs]) -> list[EndedOut | AppError]:
        """End (token, outcome, result) requests in one script call; each ends, or fails with its own error."""
        outcomes, valid = self._prepare_ends(server, ends)
        done: list[EndResult] = []
        if valid:
            keys = self.store.keys(server.node, server.application_environment)  # type: ignore[arg-type]
            done = await self.store.end(keys, server.id, [v for _, v in valid])
        return self._settle_ends(ends, outcomes, valid, done)

    def _prepare_ends(
        self, server: ConnInfo, ends: list[EndRequestArgs]
    ) -> tuple[list[EndedOut | AppError | None], list[tuple[int, EndArgs]]]:
        """Each end's error where it is refused before reaching the queues, and the script arguments of the others
        with their index."""
        outcomes: list[EndedOut | AppError | None] = [None] * len(ends)
        valid: list[tuple[int, EndArgs]] = []
        for i, (token, outcome, result) in enumerate(ends):
            try:
                _, request_id = self._held_keys(server, token)
                valid.append((i, (request_id, outcome, self._result_text(result))))
            except AppError as exc:
                outcomes[i] = exc
        return outcomes, valid

    @staticmethod
    def _settle_ends(
        ends: list[EndRequestArgs], outcomes: list[EndedOut | AppError | None], valid: list[tuple[int, EndArgs]], done: list[EndResult]
    ) -> list[EndedOut | AppError]:
        for (i, _), result in zip(valid, done, strict=True):
            if result.code == 0:
                record = result.record
                outcomes[i] = EndedOut(token=ends[i][0], outcome=record["outcome"], response_time_ms=record["ended"] - record["inserted"])
            else:
                outcomes[i] = lua_error(result.code, [result.value])
        return outcomes  # type: ignore[return-value]

    def _result_text(self, result: Any) -> str | None:
        if result is None:
            return None
        encoded = _json_bytes(result, "result")
        if len(encoded) > self.settings.max_result_bytes:
            raise PayloadTooLarge(f"the result has {len(encoded)} bytes; at most {self.settings.max_result_bytes}", path="result")
        return encoded.decode()

    def _held_keys(self, server: ConnInfo, token: str) -> tuple[AeKeys, str]:
        parsed = parse_token(token)
        if parsed is None:
            raise NotFound("no such work request", code="unknown_work")
        node, ae, request_id = parsed
        if (node, ae) != (server.node, server.application_environment):
            raise Conflict("the work request is not held by this server (never selected by it, or reassigned)", code="not_holder")
        return self.store.keys(node, ae), request_id

    # ---- delete (IWM4QDE) ---------------------------------------------------------------------------------

    async def delete(self, token: str, connect_token: str) -> None:
        qm = await self._connection(connect_token, "queue_manager")
        parsed = parse_token(token)
        if parsed is None:
            raise NotFound("no such work request", code="unknown_work")
        node, ae, request_id = parsed
        await self.store.delete(self.store.keys(node, ae), request_id, qm.id)


def _split_outcomes(ends: list[EndRequestArgs], outcomes: list[EndedOut | AppError]) -> tuple[list[EndedOut], list[EndErrorOut]]:
    ended = [o for o in outcomes if isinstance(o, EndedOut)]
    errors = [
        EndErrorOut(token=e[0], code=o.code, message=o.message) for e, o in zip(ends, outcomes, strict=True) if isinstance(o, AppError)
    ]
    return ended, errors


def _json_bytes(value: Any, path: str) -> bytes:
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:  # e.g. an integer beyond 64 bits, which JSON parsers disagree on
        raise ValidationFailed([{"path": path, "message": f"not storable as JSON: {exc}"}]) from exc


def _item_out(keys: AeKeys, config: AeConfig, selected: Selected) -> WorkItemOut:
    meta = selected.meta
    return WorkItemOut(
        token=keys.token(selected.id),
        service_class=meta["sc"],
        report_class=meta["rc"],
        payload=orjson.loads(selected.payload),
        userid=meta.get("userid"),
        enclave=meta.get("enclave"),
        state="begun" if meta["state"] == "b" else "selected",
        deliveries=meta["deliveries"],
        inserted_at=datetime.fromtimestamp(meta["inserted"] / 1000, UTC),
        lease_expires_at=datetime.fromtimestamp((meta["selected"] + config.completion_time_ms) / 1000, UTC),
    )
