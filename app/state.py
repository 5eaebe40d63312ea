"""What one service process holds for its lifetime: engine, sessions, Redis, caches."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.auth.service import KeyCache
from app.config import Settings
from app.connections.service import ConnectionCache
from app.operator.service import OperatorStore
from app.policy.service import PolicyStore
from app.queues.store import QueueStore
from app.routing.service import Router
from app.scheduler.service import SchedulerMember
from app.shutdown import ShutdownNotice
from app.work.dispatch import Dispatcher


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
    # Event streams (GET /v1/events) and the key cache's subscription block on Redis: their own client, so they
    # never hold the API's connections.
    events_redis: Redis
    # Given when this process is told to stop: long polls answer and event streams end (app/shutdown.py).
    shutdown: ShutdownNotice
    event_subscribers: int = 0
    # This process's membership of the scheduler election (None when it runs no background duties).
    scheduler: SchedulerMember | None = None
