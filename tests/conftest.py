"""Fixtures that build real state: a real redis-server, real SQLite files and (where reachable) PostgreSQL."""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from app.config import Settings
from app.db import Base
from app.main import create_app
from app.migrate import head_revision, upgrade
from app.models import import_all_models
from app.queues.scripts import queue_sources
from app.redis.context import RedisContext
from app.redis.embedded import EmbeddedRedis
from app.redis.scripts import Scripts
from app.redis.topology import close_redis, is_cluster, open_redis
from tests.processes import ServiceProcess
from tests.redis_cluster import LocalCluster, redis_cluster

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_POLICY = (ROOT / "examples" / "policy.yaml").read_bytes()
ADMIN_KEY = "wlm_test-admin-key-0123456789abcdefghijklmnopqrstuv"
LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


def _postgres_admin_url() -> str | None:
    """A PostgreSQL server the tests may create databases on, or None (tests that need one are skipped)."""
    url = os.environ.get("WLM_TEST_DATABASE_URL") or LOCAL_POSTGRES
    try:
        with psycopg.connect(url, connect_timeout=2, autocommit=True):
            return url
    except psycopg.Error:
        return None


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    yield server.start()
    server.stop()


@pytest.fixture
async def redis_context(redis_url: str) -> AsyncIterator[RedisContext]:
    """A domain's Redis records' context on the session's Redis (or a module's `redis_url`), under a prefix of its
    own, with the scripts loaded as the service loads them."""
    redis = await open_redis(redis_url, await is_cluster(redis_url), max_connections=20)
    context = RedisContext(redis, f"t{uuid.uuid4().hex[:10]}", Scripts(redis, queue_sources()))
    yield context
    await context.scripts.aclose()
    await close_redis(redis)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[ServiceProcess]:
    """A module's own `wlm serve` on embedded defaults, shared by its tests (a module that needs other settings
    defines its own `service`)."""
    yield from ServiceProcess.running(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One 3-master Redis Cluster for every module that only uses it. Tests share it as they share the session's Redis
    server: each keeps its keys under a prefix of its own. A test that kills or stops nodes starts a cluster of its
    own."""
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    admin_url = _postgres_admin_url()
    if admin_url is None:
        pytest.skip("no PostgreSQL: set WLM_TEST_DATABASE_URL or run one on 127.0.0.1:5432")
    name = f"wlm_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    upgrade(url)
    yield url
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per test process, which each test copies: its migration took ~80 ms of
    CPU per test (tests/test_migrations.py migrates its copies down and up again)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "wlm.db"
    upgrade(f"sqlite:///{path}")
    assert [p.name for p in path.parent.iterdir()] == [path.name], "the migrated file has a journal beside it"
    return path


def _empty_postgres(url: str) -> None:
    import_all_models()
    with psycopg.connect(url, autocommit=True) as conn:
        [revision] = conn.execute("SELECT version_num FROM alembic_version").fetchone() or [None]
        if revision != head_revision():  # an earlier test downgraded the schema
            upgrade(url)
        # An earlier test's app is gone, but a connection of its pool can outlive it until collected (seen: one
        # left inside a transaction, and emptying waited for its lock for minutes). Nothing else may hold one now.
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        # Emptied row by row, dependents first, and the sequences restarted: what TRUNCATE ... RESTART IDENTITY does,
        # in 11 ms instead of 60-80 (TRUNCATE makes each table's files anew; these hold a test's few rows).
        listed = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'")
        tables = {row[0] for row in listed}
        ordered = [table.name for table in reversed(Base.metadata.sorted_tables)]
        assert set(ordered) == tables, f"tables without a model, or models without a table: {set(ordered) ^ tables}"
        with conn.transaction():
            for table in ordered:
                conn.execute(f'DELETE FROM "{table}"')
            for [sequence] in conn.execute("SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'").fetchall():
                conn.execute(f'ALTER SEQUENCE "{sequence}" RESTART')


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database: a new copy of the migrated SQLite file, or the session's PostgreSQL database
    emptied."""
    if request.param == "sqlite":
        shutil.copyfile(request.getfixturevalue("sqlite_template"), tmp_path / "wlm.db")
        return f"sqlite:///{tmp_path / 'wlm.db'}"
    url: str = request.getfixturevalue("postgres_database")
    _empty_postgres(url)
    return url


class ExitReceiver:
    """A real HTTP endpoint for queue-manager exit calls; answers 500 to the first `fail_first` calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, str], bytes]] = []
        self.fail_first = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                failing = receiver.fail_first > 0
                if failing:
                    receiver.fail_first -= 1
                else:
                    receiver.calls.append((dict(self.headers), body))
                self.send_response(500 if failing else 204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/exit"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        self.calls.clear()
        self.fail_first = 0


@pytest.fixture(scope="session")
def exit_receiver() -> Iterator[ExitReceiver]:
    receiver = ExitReceiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture
def settings(tmp_path: Path, redis_url: str, database_url: str, exit_receiver: ExitReceiver) -> Settings:
    exit_receiver.reset()
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        redis_url=redis_url,
        redis_prefix=f"wlmtest{uuid.uuid4().hex[:8]}",
        bootstrap_admin_key=ADMIN_KEY,
        exit_url_allowlist=["https://qm.example.com/*", exit_receiver.url],
        lease_check_seconds=0.1,
        records_flush_seconds=0.2,
        launcher=False,  # in-process apps listen on no port their servers could reach; tests/servers/test_launcher.py runs it
        exit_retry_base_seconds=0.1,
        # Scrapes read the queues at once, as tests that change a queue and scrape expect; tests/health/test_exposition.py
        # covers the scheduler's rendering.
        metrics_max_age_seconds=0,
    )


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The service in this process, started and stopped as uvicorn would (a replica, where several share a Redis)."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@asynccontextmanager
async def client_of(application: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://wlm") as http:
        yield http


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    async with running_app(settings) as application:
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(app) as http:
        yield http


@pytest.fixture
async def other_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """A second replica (another process, as far as pub/sub goes): another app on the same Redis and database."""
    async with running_app(settings) as replica:
        yield replica


@pytest.fixture
async def other(other_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(other_app) as http:
        yield http


@pytest.fixture
async def redis_admin(redis_url: str) -> AsyncIterator[Redis]:
    """A client of the tests' Redis, to look at and set what the service keeps there (a cluster client where the
    tests run on a Redis Cluster)."""
    client = await open_redis(redis_url, await is_cluster(redis_url), max_connections=20)
    yield client
    await close_redis(client)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


ADMIN = bearer(ADMIN_KEY)


async def make_key(client: httpx.AsyncClient, name: str, roles: list[str], permits: list[str] | None = None) -> dict[str, str]:
    """A new principal with `roles` and `permits`, and auth headers with a fresh key of it."""
    response = await client.post("/v1/principals", headers=ADMIN, json={"name": name, "roles": roles, "permits": permits or []})
    assert response.status_code == 201, response.text
    response = await client.post("/v1/api-keys", headers=ADMIN, json={"principal": name})
    assert response.status_code == 201, response.text
    return bearer(response.json()["key"])


async def install_policy(
    client: httpx.AsyncClient, document: bytes | str = EXAMPLE_POLICY, media: str = "application/yaml"
) -> dict[str, Any]:
    response = await client.put("/v1/policy", headers={**ADMIN, "Content-Type": media}, content=document)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]
