"""The one settings class."""

from __future__ import annotations

from pathlib import Path

from app.config import Settings


def test_defaults_are_the_embedded_ones(monkeypatch):
    for name in ("WLM_DATABASE_URL", "WLM_REDIS_URL", "WLM_DATA_DIR", "WLM_PORT"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(_env_file=None)
    assert settings.port == 8000 and settings.redis_url is None
    assert settings.resolved_database_url == f"sqlite+aiosqlite:///{(Path('data') / 'wlm.db').resolve()}"


def test_environment_with_prefix(monkeypatch, tmp_path):
    monkeypatch.setenv("WLM_PORT", "9001")
    monkeypatch.setenv("WLM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("WLM_EXIT_URL_ALLOWLIST", "https://a.example/*, https://b.example/x")
    settings = Settings(_env_file=None)
    assert settings.port == 9001 and settings.data_dir == tmp_path
    assert settings.exit_url_allowlist == ["https://a.example/*", "https://b.example/x"]


def test_empty_variables_mean_unset(monkeypatch):
    # docker compose passes `${VAR:-}` as an empty string; it must not become an empty admin key or URL.
    for name in ("WLM_BOOTSTRAP_ADMIN_KEY", "WLM_REDIS_URL", "WLM_DATABASE_URL"):
        monkeypatch.setenv(name, "")
    settings = Settings(_env_file=None)
    assert settings.bootstrap_admin_key is None and settings.redis_url is None and settings.database_url is None
