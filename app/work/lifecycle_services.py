"""The work lifecycle's services, built once per process over its process-wide collaborators; each call names its
caller."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.roles import PrincipalInfo
from app.config import Settings
from app.connections.service import ConnectionCache
from app.operator.service import OperatorStore
from app.policy.service import PolicyStore
from app.queues.store import QueueStore
from app.routing.service import Router
from app.work.begin_end_delete import Ending
from app.work.call_context import CallerConnections
from app.work.enclave_records import EnclaveRecords
from app.work.enclaves import Enclaves
from app.work.idempotency_routes import IdempotencyRoutes
from app.work.insert import Insertion
from app.work.long_poll import Dispatcher
from app.work.select import Selection
from app.work.status import StatusReader


@dataclass(frozen=True, slots=True)
class WorkServices:
    enclaves: Enclaves
    insertion: Insertion
    selection: Selection
    ending: Ending
    status: StatusReader

    @classmethod
    def build(
        cls,
        sessions: async_sessionmaker[AsyncSession],
        connection_cache: ConnectionCache,
        operator: OperatorStore,
        store: QueueStore,
        policies: PolicyStore,
        dispatcher: Dispatcher,
        router: Router,
        settings: Settings,
    ) -> WorkServices:
        connections = CallerConnections(sessions, store, connection_cache)
        enclaves = Enclaves(connections, EnclaveRecords(store.context), policies, settings)
        ending = Ending(connections, store, policies, settings)
        return cls(
            enclaves=enclaves,
            insertion=Insertion(
                connections, enclaves, store, IdempotencyRoutes(store.context, settings.idempotency_ttl_seconds), policies, router, settings
            ),
            selection=Selection(connections, ending, operator, store, policies, dispatcher, settings),
            ending=ending,
            status=StatusReader(sessions, store, policies, operator),
        )


@dataclass(frozen=True, slots=True)
class WorkCall:
    """One request's caller, its role checked, and the services it calls."""

    work: WorkServices
    principal: PrincipalInfo
