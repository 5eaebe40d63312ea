"""Migrations upgrade and downgrade on SQLite and PostgreSQL, and match the models exactly."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, inspect

from app.db import NAMING_CONVENTION
from app.migrate import alembic_config, downgrade, upgrade

TABLES = {"principals", "server_permits", "api_keys", "policy_versions", "connections", "audit_events", "application_environment_states"}


def _sync_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://")


def _tables(url: str) -> set[str]:
    engine = create_engine(_sync_url(url))
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(database_url):
    assert TABLES <= _tables(database_url)
    downgrade(database_url, "base")
    assert _tables(database_url) == set()
    upgrade(database_url)
    assert TABLES <= _tables(database_url)


def test_models_and_migrations_agree(database_url):
    # Raises if autogenerate would write anything: the models changed without a migration.
    command.check(alembic_config(database_url))


def test_constraints_are_named(database_url):
    engine = create_engine(_sync_url(database_url))
    try:
        inspector = inspect(engine)
        for table in TABLES:
            for fk in inspector.get_foreign_keys(table):
                assert fk["name"] and fk["name"].startswith("fk_"), (table, fk)
            for uq in inspector.get_unique_constraints(table):
                assert uq["name"] and uq["name"].startswith("uq_"), (table, uq)
    finally:
        engine.dispose()
    assert set(NAMING_CONVENTION) == {"ix", "uq", "ck", "fk", "pk"}


def _columns(url: str, table: str) -> set[str]:
    engine = create_engine(_sync_url(url))
    try:
        return {column["name"] for column in inspect(engine).get_columns(table)}
    finally:
        engine.dispose()


def test_the_report_delay_columns_go_down_and_come_back(database_url):
    delays = {"delay_samples", "using_pct", "delay_servers_starting_pct", "delay_busy_lower_pct", "unknown_pct"}
    assert delays <= _columns(database_url, "workload_reports")
    downgrade(database_url, "0009")
    left = _columns(database_url, "workload_reports")
    assert not {name for name in left if name.endswith("_pct") or name == "delay_samples"}
    assert {"performance_index", "goal_met_share"} <= left
    upgrade(database_url)
    assert delays <= _columns(database_url, "workload_reports")
