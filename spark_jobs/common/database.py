"""The service's database, as a job's driver reaches it: a blocking SQLAlchemy Core engine and tables read from
the database itself (the service's migrations own the schema; a job declares none of it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, MetaData, Table, create_engine

# URL prefixes as users write them, or with the service's async drivers, and the blocking driver of each: psycopg
# for PostgreSQL, the standard library's for SQLite.
_BLOCKING_DRIVERS = (
    ("postgresql://", "postgresql+psycopg://"),
    ("postgres://", "postgresql+psycopg://"),
    ("sqlite+aiosqlite://", "sqlite://"),
)


def sync_database_url(url: str) -> str:
    """The service's database URL (WLM_DATABASE_URL) for a blocking client."""
    for given, blocking in _BLOCKING_DRIVERS:
        if url.startswith(given):
            return blocking + url[len(given) :]
    return url


@contextmanager
def database(url: str) -> Iterator[Engine]:
    """An engine on the database at `url`, disposed of on exit (a job connects once or twice)."""
    engine = create_engine(sync_database_url(url))
    try:
        yield engine
    finally:
        engine.dispose()


def reflected(connection: Connection, name: str) -> Table:
    """The table `name` with the columns and types the database has."""
    return Table(name, MetaData(), autoload_with=connection)


def as_utc(moment: datetime) -> datetime:
    """A timestamp read from the database, aware: SQLite keeps the service's UTC timestamps without their zone."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
