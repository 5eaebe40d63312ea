"""The one settings class."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import Settings
from tests.processes import WLM


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


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("BLOCKED_PROMOTION_SECONDS", "0", "greater than 0"),
        ("BLOCKED_PROMOTION_SECONDS", "-5", "greater than 0"),
        ("BLOCKED_PROMOTION_SHARE", "0", "greater than 0"),
        ("BLOCKED_PROMOTION_SHARE", "1.5", "less than or equal to 1"),
    ],
)
def test_blocked_promotion_settings_out_of_range_are_refused_naming_them(monkeypatch, name, value, says):
    monkeypatch.setenv(f"WLM_{name}", value)
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None)
    assert name.lower() in str(refused.value) and says in str(refused.value)


@pytest.mark.parametrize("prefix", ["", "wlm*", "wlm{a}", "a:b", "w?", "[wlm]", "wl\\m", "é", "x" * 65])
def test_a_redis_prefix_that_would_break_hash_tags_or_channel_patterns_is_refused(monkeypatch, prefix):
    monkeypatch.setenv("WLM_REDIS_PREFIX", prefix)
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None)
    assert "redis_prefix" in str(refused.value)


@pytest.mark.parametrize("prefix", ["wlm", "prod-eu.1", "WLM_test"])
def test_a_redis_prefix_of_letters_digits_and_separators_is_taken(monkeypatch, prefix):
    monkeypatch.setenv("WLM_REDIS_PREFIX", prefix)
    assert Settings(_env_file=None).redis_prefix == prefix


def test_the_service_refuses_to_start_with_a_promotion_share_out_of_range(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WLM_")}
    env |= {"WLM_DATA_DIR": str(tmp_path / "data"), "WLM_BLOCKED_PROMOTION_SHARE": "2"}
    done = subprocess.run([WLM, "serve"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "blocked_promotion_share" in done.stderr and "less than or equal to 1" in done.stderr
    assert not (tmp_path / "data").exists()  # refused before it touched anything


def test_blocked_promotion_defaults_are_z_os_s():
    settings = Settings(_env_file=None)
    assert (settings.blocked_promotion_seconds, settings.blocked_promotion_share) == (20.0, 0.005)


def test_a_tombstone_bound_that_covers_no_completion_time_is_refused(monkeypatch):
    monkeypatch.setenv("WLM_TOMBSTONE_SECONDS", "90")  # the heartbeat timeout (30 s) and the margin (60 s): nothing left
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None)
    assert "tombstone_seconds (90) must exceed" in str(refused.value)


def test_the_default_tombstone_bound_covers_the_default_completion_time():
    settings = Settings(_env_file=None)
    assert settings.longest_completion_ms == (300 - 30 - 60) * 1000 >= 60_000


def test_the_records_lease_is_ten_flush_intervals_at_least_10_s_unless_given():
    assert Settings(_env_file=None).records_lease_ms == 10_000
    assert Settings(_env_file=None, records_flush_seconds=3).records_lease_ms == 30_000
    assert Settings(_env_file=None, records_flush_seconds=0.2, records_lease_seconds=2.5).records_lease_ms == 2_500


def test_a_records_lease_within_one_flush_interval_is_refused(monkeypatch):
    monkeypatch.setenv("WLM_RECORDS_LEASE_SECONDS", "1")  # the default flush interval: the lease would lapse between flushes
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None)
    assert "records_lease_seconds must be longer than records_flush_seconds" in str(refused.value)
