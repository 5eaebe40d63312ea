"""create_app(): the lifespan opens Redis (starting the embedded one if none is configured), the database
and the caches; routers are mounted; errors are rendered by the one handler."""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI
from redis.asyncio import Redis

from app.audit.router import router as audit_router
from app.auth.router import router as auth_router
from app.auth.service import KeyCache, ensure_bootstrap_admin
from app.config import Settings, get_settings
from app.connections.queue_managers import ConnectedQueueManagers
from app.connections.router import router as connections_router
from app.connections.service import ConnectionCache
from app.db import create_engine, session_factory
from app.dead_letters.router import router as dead_letters_router
from app.environments.router import router as environments_router
from app.errors import install_error_handlers
from app.events.advisories import Advisories, AdvisoryReader
from app.events.router import router as events_router
from app.events.service import KEEPALIVE_SECONDS, EventStreams
from app.health.exposition import keep_rendering
from app.health.router import router as health_router
from app.migrate import current_revision, head_revision
from app.models import import_all_models
from app.openapi import openapi_document, operation_id
from app.operator.router import router as operator_router
from app.operator.service import OperatorStore
from app.policy.router import router as policy_router
from app.policy.service import PolicyStore, refuse_short_tombstones
from app.queues.keys import durability_probe_key
from app.queues.store import QueueStore
from app.redis.durability import durability_at_start
from app.redis.embedded import EmbeddedRedis
from app.redis.topology import close_redis, is_cluster, open_redis
from app.reports.router import dashboard_assets, dashboard_router
from app.reports.router import router as reports_router
from app.resource_groups.router import router as resource_groups_router
from app.routing.router import router as routing_router
from app.routing.service import Router, RoutingStore
from app.scheduler.duties.runner import Duties, scheduled_duties
from app.scheduler.duty_leases import DutyLeases
from app.scheduler.router import router as scheduler_router
from app.scheduler.service import SchedulerMember
from app.servers.router import router as servers_router
from app.shared.generation import Generations
from app.state import AppState
from app.sweeper.blobs import SweptBlobs
from app.sweeper.router import router as sweeper_router
from app.web.custom_methods import DeprecationMiddleware
from app.web.guards import BodyLimitMiddleware, HotPathsMiddleware, RejectNulMiddleware
from app.web.http_metrics import MetricsMiddleware
from app.web.shutdown import ShutdownNotice, given_on_stop_signals
from app.web.telemetry import telemetry_config
from app.what_if.router import router as what_if_router
from app.what_if.runner import WhatIfRunner
from app.work.lifecycle_services import WorkServices
from app.work.long_poll import Dispatcher
from app.work.router import HOT_PATHS
from app.work.router import router as work_router
from app.work.schemas import WIRE_PAYLOAD_FACTOR, WORK_FIELDS_BYTES

log = logging.getLogger("wlm")
# The collector's thresholds once start-up's objects are frozen. CPython's (700, 10, 10) had a worker at 800
# long-polled requests a second run 30-50 young collections a second (what is live mid-request crosses 700 new
# objects that often), every tenth an older one and every hundredth a full one: 20-40 ms of CPU that stops the
# event loop, two to four times in ten seconds, and the insert-to-select p99 with it (docs/benchmarks.md, issue 41).
# A request's objects die with it (refcounts); the cycles it leaves are few (a few objects a request), so a young
# collection every 10,000 is enough, an older one after 20 of those, a full one after 50 older ones.
GC_THRESHOLDS = (10_000, 20, 50)
_gc_frozen = False


def _freeze_what_is_loaded() -> None:
    """What is loaded by the end of the start (modules, the ORM, models, the policy) lives as long as the process:
    moved out of the collector's sight, a full collection scans only what requests allocate, so it no longer pauses
    the event loop for tens of milliseconds (the tail of the insert-to-select latency). Once per process: an app
    started again in the same process (tests) would otherwise pin its predecessors' garbage. Known by a flag, not
    by gc.get_freeze_count(), which walks every frozen object (20 ms of CPU for each app a test starts)."""
    global _gc_frozen
    if not _gc_frozen:
        _gc_frozen = True
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)


def _announce_bootstrap_key(key: str, settings: Settings) -> None:
    print(
        "\n"
        "  WLM bootstrap admin API key (shown once; also saved to "
        f"{(settings.data_dir / 'admin.key').resolve()} with mode 0600):\n\n"
        f"      {key}\n\n"
        "  Use it as 'Authorization: Bearer <key>'; create other keys with `wlm keys create`.\n",
        file=sys.stderr,
        flush=True,
    )


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    embedded = None
    redis_url = settings.redis_url
    if redis_url is None:
        # On this thread, not in a worker thread: the parent-death signal follows the thread that started the child.
        embedded = EmbeddedRedis(settings.data_dir, settings.durability)
        redis_url = embedded.start()
    engine = create_engine(settings.resolved_database_url)
    redis: Redis | None = None
    events_redis: Redis | None = None
    dispatcher: Dispatcher | None = None
    shutdown = ShutdownNotice()
    member: SchedulerMember | None = None
    state: AppState | None = None
    queues: QueueStore | None = None
    launching: Duties | None = None
    try:
        cluster = await is_cluster(redis_url)
        redis = await open_redis(redis_url, cluster, max_connections=settings.redis_max_connections)
        # The event streams, and the key cache's subscription: a stream's read blocks up to KEEPALIVE_SECONDS, beyond
        # the client's default socket timeout (5 s since redis-py 8), which would break every idle stream.
        events_redis = await open_redis(
            redis_url, cluster, max_connections=settings.events_max_subscribers + 1, socket_timeout=2 * KEEPALIVE_SECONDS
        )
        dispatcher = Dispatcher(redis, settings.redis_prefix, timed=settings.timing_header)
        shutdown.on_notice(dispatcher.drain)
        durability = await durability_at_start(
            redis, settings.durability, durability_probe_key(settings.redis_prefix), settings.replica_wait_ms
        )
        head = head_revision()
        if await current_revision(engine) != head:
            raise RuntimeError("the database schema is not up to date: run `wlm db upgrade` (make run does)")
        sessions = session_factory(engine)
        key = await ensure_bootstrap_admin(sessions, settings.bootstrap_admin_key, settings.data_dir)
        if key:
            _announce_bootstrap_key(key, settings)
        queues = QueueStore(
            redis,
            settings.redis_prefix,
            idempotency_ttl_s=settings.idempotency_ttl_seconds,
            tombstone_ms=settings.tombstone_seconds * 1000,
            samples_ms=int(settings.goal_window_seconds * 1000),
            dead_letter_ms=int(settings.dead_letter_days * 86_400_000),
            promotion_ms=math.ceil(settings.blocked_promotion_seconds * 1000),
            promotion_share=settings.blocked_promotion_share,
            blobs=SweptBlobs(sessions),
            durability=durability,
        )
        connection_cache = ConnectionCache(settings.connection_cache_seconds)
        generations = Generations(sessions, settings.policy_cache_seconds)
        policies = PolicyStore(generations, ConnectedQueueManagers())
        await refuse_short_tombstones(policies, settings.longest_completion_ms)
        operator = OperatorStore(generations)
        router = Router(RoutingStore(generations, queues))
        app.state.wlm = state = AppState(
            settings=settings,
            engine=engine,
            sessions=sessions,
            redis=redis,
            key_cache=KeyCache(settings.auth_cache_seconds, settings.redis_prefix, redis, events_redis),
            connection_cache=connection_cache,
            policies=policies,
            operator=operator,
            schema_head=head,
            queues=queues,
            dispatcher=dispatcher,
            router=router,
            work=WorkServices.build(sessions, connection_cache, operator, queues, policies, dispatcher, router, settings),
            events=EventStreams(
                Advisories(queues.context), AdvisoryReader(events_redis, settings.redis_prefix), settings.events_max_subscribers, shutdown
            ),
            leases=DutyLeases(redis),
            shutdown=shutdown,
            what_if=WhatIfRunner(sessions, settings),
        )
        await dispatcher.start()
        if settings.background_duties:
            rendering = [("metrics", settings.metrics_max_age / 2, partial(keep_rendering, queues, policies))]
            member = state.scheduler = scheduled_duties(state, rendering if settings.metrics_max_age > 0 else [])
            await member.start()
            if settings.launcher:
                launching = Duties(state, 0, lambda: True, member.name, launcher=True)
                await launching.start()
        _freeze_what_is_loaded()
        state.what_if.kick()  # runs queued before a restart; one left running is failed
        async with state.key_cache.listening():
            with given_on_stop_signals(shutdown):
                yield
    finally:
        shutdown.give()
        if state is not None:
            await state.what_if.stop()
        if launching is not None:
            await launching.stop()
        if member is not None:
            await member.stop()
        if dispatcher is not None:
            await dispatcher.stop()
        if queues is not None:
            await queues.aclose()
        for client in (redis, events_redis):
            if client is not None:
                await close_redis(client)
        await engine.dispose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


def _body_limits(settings: Settings) -> dict[tuple[str, str], int]:
    """The most bytes a request body may have, by route; any other route's: max_body_bytes."""
    return {
        ("PUT", "/v1/policy"): settings.max_policy_bytes,
        ("POST", "/v1/work"): WIRE_PAYLOAD_FACTOR * settings.max_payload_bytes + WORK_FIELDS_BYTES,
        ("POST", "/v1/work:batch"): settings.max_batch_bytes,
        # A select may end up to 1000 requests first, each with its result.
        ("POST", "/v1/work/select"): settings.max_batch_bytes,
        # A candidate policy as a JSON string: escaping can double it.
        ("POST", "/v1/reports/what-if"): 2 * settings.max_policy_bytes + 1024,
    }


def create_app(settings: Settings | None = None) -> FastAPI:
    import_all_models()
    app = FastAPI(
        title="WLM",
        version="0.1.0",
        description="A goal-oriented workload manager: classify work, queue it per application environment and "
        "service class, and manage servers so the most important goals are met first.",
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        telemetry=telemetry_config(),
    )
    app.state.settings = settings = settings or get_settings()
    install_error_handlers(app)
    # Each middleware added runs before those added earlier. Bodies are bounded before anything reads them (the hot
    # paths, authentication, FastAPI's parsing); only the metrics, which read none, see the request first and so
    # count the refusals too.
    app.add_middleware(DeprecationMiddleware)  # next to the router: it reads the route the router matched
    app.add_middleware(HotPathsMiddleware, paths=HOT_PATHS, timed=settings.timing_header)
    app.add_middleware(RejectNulMiddleware)
    app.add_middleware(BodyLimitMiddleware, limits=_body_limits(settings), default=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware)
    # A request's route is found by trying the routers in this order, each of its routes in turn (1–2 µs each), and
    # FastAPI prepares a router's routes at the first request that passes them: the calls of a request's life first,
    # then what every client and probe calls (in tests, which start an app each, ~1 ms per route prepared).
    for router in (
        work_router,
        connections_router,
        health_router,
        policy_router,
        auth_router,
        environments_router,
        servers_router,
        operator_router,
        reports_router,
        routing_router,
        scheduler_router,
        events_router,
        sweeper_router,
        audit_router,
        dead_letters_router,
        resource_groups_router,
        what_if_router,
    ):
        app.include_router(router)
    app.include_router(dashboard_router)
    app.mount("/dashboard/static", dashboard_assets(), name="dashboard-static")
    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]  # FastAPI's documented way to customise the schema
    return app
