"""Enclaves (IWM4ECRE, IWM4EDEL): a transaction's classes, decided once and given to each of its work requests."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from app.auth.roles import PrincipalInfo
from app.config import Settings
from app.connections.service import ConnInfo
from app.errors import NotFound
from app.policy.service import PolicyStore, qualifier_attributes
from app.queues.request_meta import Enclave
from app.work.call_context import CallerConnections
from app.work.enclave_records import EnclaveRecords
from app.work.schemas import EnclaveIn, EnclaveOut

ENCLAVE_PREFIX = "e_"


@dataclass(frozen=True, slots=True)
class Enclaves:
    connections: CallerConnections
    records: EnclaveRecords
    policies: PolicyStore
    settings: Settings

    async def create(self, principal: PrincipalInfo, body: EnclaveIn) -> EnclaveOut:
        qm = await self.connections.of(principal, body.connect_token, "queue_manager")
        policy = await self.policies.active()
        if body.parent is not None:
            parent = await self.of(qm, body.parent)
            enclave = parent.replace(dependent=True, parent=body.parent)
        else:
            result = policy.classify(qm.subsystem_type, qualifier_attributes(body.classification, path="classification"))
            enclave = Enclave.of(
                service_class=result.service_class,
                report_class=result.report_class,
                dependent=False,
                queue_manager=qm.id,
                policy=policy.version,
            )
        enclave_id = secrets.token_urlsafe(16)
        ttl = self.settings.enclave_ttl_seconds
        await self.records.save(enclave_id, enclave, ttl)
        return EnclaveOut(
            token=ENCLAVE_PREFIX + enclave_id,
            service_class=enclave.service_class,
            report_class=enclave.report_class,
            dependent=enclave.dependent,
            policy_version=enclave.policy,
            expires_at=datetime.fromtimestamp(time.time() + ttl, UTC),
        )

    async def delete(self, principal: PrincipalInfo, token: str, connect_token: str) -> None:
        qm = await self.connections.of(principal, connect_token, "queue_manager")
        await self.of(qm, token)
        await self.records.delete(token.removeprefix(ENCLAVE_PREFIX))

    async def of(self, qm: ConnInfo, token: str) -> Enclave:
        """The enclave `token` names, if the queue manager `qm` created it and it has not expired."""
        enclave = await self.records.get(token.removeprefix(ENCLAVE_PREFIX)) if token.startswith(ENCLAVE_PREFIX) else None
        if enclave is None or enclave.queue_manager != qm.id:
            raise NotFound("unknown or expired enclave token", code="unknown_enclave")
        return enclave
