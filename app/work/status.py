"""A request's own status (GET /v1/work/{token}): for the principal whose connection queued it, or an operator
(anyone else is answered as for an unknown token). Its state, class and period and deliveries; while it is queued,
how many requests of its class queue are ahead of it, when it is expected to start (app/servers/expected_start.py)
and why it waits (app/servers/delays.py).

One script call reads what the queues know (app/queues/request_status.py; a swept request costs an indexed read of
the database and a second call); the facts beside them are what this process holds (the active policy and the
environments' states, cached) and, for a class in a resource group, the group's count."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.roles import PrincipalInfo, Role
from app.connections.service import principal_of_connection
from app.errors import NotFound
from app.operator.service import OperatorStore
from app.operator.states import holds_work_back
from app.policy.active import ActivePolicy
from app.policy.service import PolicyStore
from app.queues.base import AeConfig
from app.queues.keys import parse_token
from app.queues.request_status import DeadStatus, EndedStatus, LiveStatus
from app.queues.resource_groups import group_by_class
from app.queues.store import QueueStore
from app.servers.delays import DelayFacts, delay_cause
from app.servers.expected_start import StartBasis, busy_with_more_important, class_execution_ms, expected_wait_ms
from app.servers.schemas import PeriodPerformance
from app.shared.ttl_cache import TtlCache
from app.work.schemas import WorkStatusOut
from spark_jobs.manager.goals import period_number

_OPERATOR = frozenset({Role.OPERATOR})
# A connection's principal never changes: known once, it is kept for this long (bounded in number by the cache).
OWNER_CACHE_SECONDS = 3600.0


def _unknown() -> NotFound:
    return NotFound("no such work request", code="unknown_work")


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


@dataclass(frozen=True, slots=True)
class StatusReader:
    sessions: async_sessionmaker[AsyncSession]
    store: QueueStore
    policies: PolicyStore
    operator: OperatorStore
    _owners: TtlCache[int | None] = field(default_factory=lambda: TtlCache(OWNER_CACHE_SECONDS))

    async def status(self, principal: PrincipalInfo, token: str) -> WorkStatusOut:
        parsed = parse_token(token)
        if parsed is None:
            raise _unknown()
        node, ae, request_id = parsed
        policy = await self.policies.current()
        config = policy.queue_config(ae) if policy is not None else None
        classes = list(zip(config.class_order, config.tiers, strict=True)) if config is not None else []
        status = await self.store.statuses.get(self.store.keys(node, ae), classes, request_id)
        if status is None:
            raise _unknown()
        owner = status.queue_manager if isinstance(status, EndedStatus) else status.meta.queue_manager
        if not await self._may_see(principal, owner):
            raise _unknown()
        if isinstance(status, EndedStatus):
            deleted = status.outcome in ("deleted", "purged")
            return WorkStatusOut(
                token=token, state="deleted" if deleted else "ended", outcome=status.outcome, application_environment=ae, node=node
            )
        meta = status.meta
        answer = WorkStatusOut(
            token=token,
            state="dead" if isinstance(status, DeadStatus) else meta.state.word,  # type: ignore[arg-type]  # queued, selected or begun
            outcome=meta.outcome if isinstance(status, DeadStatus) else None,
            application_environment=ae,
            node=node,
            service_class=meta.service_class,
            period=_period(policy, meta.service_class, (meta.ended if isinstance(status, DeadStatus) else status.now_ms) - meta.inserted),
            deliveries=meta.deliveries,
            inserted_at=_at(meta.inserted),
        )
        if isinstance(status, LiveStatus) and answer.state == "queued":
            return await self._waiting(answer, status, policy, config, dict(classes))
        return answer

    async def _may_see(self, principal: PrincipalInfo, queue_manager: int | None) -> bool:
        """An operator sees every request; another principal those its own connections queued."""
        if principal.has_any(_OPERATOR):
            return True
        if queue_manager is None:
            return False
        owner = await self._owners.get_or_load(str(queue_manager), lambda: principal_of_connection(self.sessions, queue_manager))
        return owner == principal.id

    async def _waiting(
        self, answer: WorkStatusOut, status: LiveStatus, policy: ActivePolicy | None, config: AeConfig | None, tiers: dict[str, int]
    ) -> WorkStatusOut:
        """A queued request's position, expected start and delay cause."""
        meta, servers = status.meta, status.servers
        facts = DelayFacts(
            environment_holds_work=holds_work_back(await self.operator.state_of(answer.application_environment, policy)),
            delivered_before=meta.deliveries > 0,
            group_at_cap=await self._group_at_cap(config, meta.service_class),
            servers_connected=servers.connected,
            servers_wanted=servers.wanted,
            free_worker_tasks=servers.free_worker_tasks,
            holding_equal_or_higher=servers.holding_equal_or_higher,
            holding_lower=servers.holding_lower,
        )
        wait = None
        if status.ahead is not None and not facts.environment_holds_work and not facts.group_at_cap:
            performance = [PeriodPerformance.model_validate_json(raw) for raw in status.performance]
            basis = StartBasis(
                ahead=status.ahead,
                execution_ms=class_execution_ms(performance, meta.service_class),
                worker_tasks=servers.worker_tasks,
                free_worker_tasks=servers.free_worker_tasks,
                servers_connected=servers.connected,
                servers_wanted=servers.wanted,
                busy_with_more_important=busy_with_more_important(performance, tiers, meta.service_class),
            )
            wait = expected_wait_ms(basis)
        return answer.model_copy(
            update={
                "position": status.ahead,
                "expected_wait_ms": None if wait is None else round(wait),
                "expected_start_at": None if wait is None else _at(status.now_ms + round(wait)),
                "delay_cause": delay_cause(facts),
            }
        )

    async def _group_at_cap(self, config: AeConfig | None, service_class: str) -> bool:
        group = group_by_class(config).get(service_class) if config is not None else None
        if group is None or group.max_in_flight is None:
            return False
        (figures,) = await self.store.groups.figures([group])
        return figures.in_flight >= group.max_in_flight


def _period(policy: ActivePolicy | None, service_class: str, elapsed_ms: int) -> int | None:
    spec = policy.service_classes.get(service_class) if policy is not None else None
    return period_number([p.duration_ms for p in spec.periods], elapsed_ms) if spec is not None else None
