"""What one service process holds for its lifetime: engine, sessions, Redis, caches."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.auth.service import KeyCache
from app.config import Settings
from app.connections.service import ConnectionCache
from app.events.service import EventStreams
from app.operator.service import OperatorStore
from app.policy.service import PolicyStore
from app.queues.store import QueueStore
from app.routing.service import Router
from app.scheduler.duty_leases import DutyLeases
from app.scheduler.service import SchedulerMember
from app.web.shutdown import ShutdownNotice
from app.what_if.runner import WhatIfRunner
from app.work.lifecycle_services import WorkServices
from app.work.long_poll import Dispatcher


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    redis: Redis
    key_cache: KeyCache
    connection_cache: ConnectionCache
    policies: PolicyStore
    operator: OperatorStore
    schema_head: str | None
    queues: QueueStore
    dispatcher: Dispatcher
    router: Router
    # The work lifecycle's services (enclaves, insert, select, begin, end, delete), built once at start.
    work: WorkServices
    # The advisory streams this process serves (GET /v1/events).
    events: EventStreams
    # Duties one process at a time should do (the records writer, the launcher per host, the manager).
    leases: DutyLeases
    # Given when this process is told to stop: long polls answer and event streams end (app/web/shutdown.py).
    shutdown: ShutdownNotice
    # What-if runs this process starts, one at a time.
    what_if: WhatIfRunner
    # This process's membership of the scheduler election (None when it runs no background duties).
    scheduler: SchedulerMember | None = None
