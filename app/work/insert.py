"""Queue insert (IWM4QIN), one request or a batch of one environment, with idempotency keys."""

from __future__ import annotations

import base64
import secrets
import time
from dataclasses import dataclass
from typing import Any

from app.auth.roles import PrincipalInfo
from app.config import Settings
from app.connections.service import ConnInfo
from app.errors import Conflict, Forbidden, PayloadTooLarge, TooManyRequests, ValidationFailed
from app.events.service import publish, subject
from app.policy.active import ActivePolicy
from app.policy.service import PolicyStore, qualifier_attributes
from app.queues.request_meta import RequestMeta
from app.queues.store import QueueStore
from app.queues.transitions import NewRequest
from app.routing.service import Router, count_routed
from app.web import timing
from app.work.call_context import CallerConnections, json_bytes
from app.work.enclaves import Enclaves
from app.work.idempotency_routes import IdempotencyRoutes
from app.work.schemas import WorkBatchIn, WorkIn, WorkItemIn, WorkQueued
from spark_jobs.manager.classification import Classification

# When this process last announced a class queue at its backlog limit: at most one advisory a second for each.
_BACKLOG_ADVISED: dict[tuple[str, str, str], float] = {}
BACKLOG_ADVISORY_SECONDS = 1.0


async def _advise_backlog_limit(store: QueueStore, ae: str, node: str, details: dict[str, Any]) -> None:
    """TIBCO Rendezvous's "task backlog limit reached", once a second per class queue however many inserts it refuses."""
    queue = (ae, node, str(details.get("service_class")))
    if time.monotonic() - _BACKLOG_ADVISED.get(queue, -BACKLOG_ADVISORY_SECONDS) < BACKLOG_ADVISORY_SECONDS:
        return
    _BACKLOG_ADVISED[queue] = time.monotonic()
    await publish(store.context, subject("WLM", "WARN", "QUEUE", "BACKLOG_LIMIT", ae), node=node, **details)


@dataclass(frozen=True, slots=True)
class Insertion:
    connections: CallerConnections
    enclaves: Enclaves
    store: QueueStore
    routes: IdempotencyRoutes
    policies: PolicyStore
    router: Router
    settings: Settings

    async def insert(self, principal: PrincipalInfo, body: WorkIn) -> tuple[WorkQueued, bool]:
        """Returns the queued request and whether it was a replay of an earlier insert (idempotency key)."""
        # WorkIn is a WorkItemIn, already validated: one-item batch without validating it again.
        batch = WorkBatchIn.model_construct(
            connect_token=body.connect_token, application_environment=body.application_environment, node=body.node, items=[body]
        )
        queued, replayed = await self.insert_batch(principal, batch, item_paths=False)
        return queued[0], replayed[0]

    async def insert_batch(
        self, principal: PrincipalInfo, body: WorkBatchIn, *, item_paths: bool = True
    ) -> tuple[list[WorkQueued], list[bool]]:
        """All or none (one script on one slot). Error paths name the item (`items[3].payload`) unless
        `item_paths` is off for the single-request form."""
        if len(body.items) > self.settings.max_batch_items:
            raise ValidationFailed([{"path": "items", "message": f"at most {self.settings.max_batch_items} items"}])
        qm = await self.connections.of(principal, body.connect_token, "queue_manager")
        policy = await self.policies.knowing(body.application_environment)
        ae = policy.environment(body.application_environment)
        if ae.subsystem_type != qm.subsystem_type:
            raise Conflict(
                f"{ae.name} serves subsystem type {ae.subsystem_type}; this queue manager is {qm.subsystem_type}",
                code="wrong_subsystem_type",
            )
        owner = policy.dynamic.get(ae.name)
        if owner is not None and owner.queue_manager_id != qm.id:
            raise Forbidden(f"{ae.name} is a dynamic application environment of another queue manager", code="outside_scope")
        node, how = await self._node_for(policy, ae.name, body.node, qm, body.items)
        keys = self.store.keys(node, ae.name)
        seen_keys: set[str] = set()
        requests, classes = [], []
        classified: dict[tuple[tuple[str, str], ...], Classification] = {}
        metas: dict[tuple[Any, ...], RequestMeta] = {}
        ids = new_ids(len(body.items))
        for i, item in enumerate(body.items):
            path = f"items[{i}]." if item_paths else ""
            request = await self._new_request(policy, qm, node, ae.name, item, path, classified, metas, ids[i])
            if item.idempotency_key:
                if item.idempotency_key in seen_keys:
                    raise ValidationFailed([{"path": f"{path}idempotency_key", "message": "repeated within the batch"}])
                seen_keys.add(item.idempotency_key)
            requests.append(request)
            classes.append((request.service_class, request.meta.report_class))
        try:
            timing.mark("script_call")
            ids = await self.store.insert(keys, qm.id, requests, ae.backlog_limit)
            timing.mark("script_reply")
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

    async def _node_for(
        self, policy: ActivePolicy, ae: str, requested: str | None, qm: ConnInfo, items: list[WorkItemIn]
    ) -> tuple[str, str]:
        """The node named, else the cluster workload algorithm's choice; and how it was chosen. A retry with an
        idempotency key goes to the node the first try went to, where the key replays it."""
        if requested is not None:
            if not policy.hosts(ae, requested):
                raise Conflict(f"node {requested} does not host {ae}", code="not_hosted", node=requested, application_environment=ae)
            return requested, "named"
        claims = [item.idempotency_key for item in items if item.idempotency_key]
        earlier = await self._claimed_node(policy, qm, ae, claims)
        if earlier is not None:
            return earlier, "algorithm"
        node = await self.router.route(policy, ae, qm.node, len(items))
        if claims:
            await self.routes.claim(qm.id, ae, claims, node)
            # A concurrent retry of the same request that claimed first wins.
            node = await self._claimed_node(policy, qm, ae, claims) or node
        return node, "algorithm"

    async def _claimed_node(self, policy: ActivePolicy, qm: ConnInfo, ae: str, claims: list[str]) -> str | None:
        """The node the first try of these idempotency keys went to, if it still hosts the environment."""
        if not claims:
            return None
        nodes = {node for node in await self.routes.routed_nodes(qm.id, ae, claims) if node is not None and policy.hosts(ae, node)}
        if len(nodes) > 1:
            raise Conflict(
                f"the idempotency keys of this batch were queued on different nodes ({', '.join(sorted(nodes))}); send those "
                "requests again on their own, or name a node",
                code="idempotency_nodes_differ",
            )
        return nodes.pop() if nodes else None

    async def _new_request(
        self,
        policy: ActivePolicy,
        qm: ConnInfo,
        node: str,
        ae: str,
        item: WorkItemIn,
        path: str,
        classified: dict[tuple[tuple[str, str], ...], Classification],
        metas: dict[tuple[Any, ...], RequestMeta],
        request_id: str,
    ) -> NewRequest:
        """`classified` holds this batch's classifications by their attributes: a batch's items mostly share them,
        and classifying each again costs some 5 µs of the service's CPU per item. `metas` holds its new requests'
        metadata by what sets it apart, for the same reason: one record (read-only) for the items that share it."""
        if item.enclave_token is not None:
            enclave = await self.enclaves.of(qm, item.enclave_token)
            sc, rc, dependent, version = enclave.service_class, enclave.report_class, enclave.dependent, enclave.policy
            if sc not in policy.service_classes:
                raise Conflict(
                    f"the enclave's service class {sc} is no longer in the policy; create a new enclave", code="enclave_class_removed"
                )
        elif item.classification is not None:
            attributes = tuple(item.classification.items())
            result = classified.get(attributes)
            if result is None:
                result = policy.classify(qm.subsystem_type, qualifier_attributes(item.classification, path=f"{path}classification"))
                classified[attributes] = result
            sc, rc, dependent, version = result.service_class, result.report_class, False, policy.version
        else:
            raise ValidationFailed(
                [{"path": f"{path}enclave_token", "message": "give an enclave_token (POST /v1/enclaves) or a classification"}]
            )
        encoded = json_bytes(item.payload, f"{path}payload")
        if len(encoded) > self.settings.max_payload_bytes:
            raise PayloadTooLarge(
                f"{path}payload has {len(encoded)} bytes; at most {self.settings.max_payload_bytes}", path=f"{path}payload"
            )
        payload = encoded.decode()
        distinct = (sc, rc, dependent, version, item.userid, item.enclave_token)
        meta = metas.get(distinct)
        if meta is None:
            meta = metas[distinct] = RequestMeta.queued(
                service_class=sc,
                report_class=rc,
                dependent=dependent,
                queue_manager=qm.id,
                subsystem_type=qm.subsystem_type,
                subsystem_name=qm.subsystem_name,
                userid=item.userid,
                enclave=item.enclave_token,
                policy=version,
                node=node,
                application_environment=ae,
                exit=qm.exit_url or "",
            )
        return NewRequest(request_id, sc, dependent, meta, payload, item.idempotency_key)


# A new request's id: 12 random bytes as 16 URL-safe base64 characters (secrets.token_urlsafe(12)).
ID_BYTES, ID_CHARS = 12, 16


def new_ids(count: int) -> list[str]:
    """`count` new ids from one read of the system's randomness, rather than one each: 12 bytes are whole base64
    quanta, so each id's 16 characters are what token_urlsafe(12) makes of its 12 bytes."""
    text = base64.urlsafe_b64encode(secrets.token_bytes(ID_BYTES * count)).decode()
    return [text[i : i + ID_CHARS] for i in range(0, ID_CHARS * count, ID_CHARS)]
