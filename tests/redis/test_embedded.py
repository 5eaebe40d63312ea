"""The embedded default: a real redis-server child with AOF, reused by other processes, stopped at exit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from app.redis.embedded import EmbeddedRedis
from tests.waiting import eventually_sync


def test_starts_with_aof_and_noeviction_and_stops(tmp_path):
    server = EmbeddedRedis(tmp_path)
    url = server.start()
    try:
        client = redis.Redis.from_url(url, decode_responses=True)
        client.set("k", "v")
        config = client.config_get("appendonly") | client.config_get("maxmemory-policy") | client.config_get("auto-aof-rewrite-min-size")
        assert config == {"appendonly": "yes", "maxmemory-policy": "noeviction", "auto-aof-rewrite-min-size": str(512 * 1024 * 1024)}
        assert client.config_get("dir")["dir"] == str((tmp_path / "redis").resolve())
        # A second user of the same data directory shares the running server instead of starting another.
        assert EmbeddedRedis(tmp_path).start() == url
    finally:
        server.stop()
    assert not (tmp_path / "redis" / "redis.port").exists()
    try:
        redis.Redis.from_url(url, socket_timeout=1).ping()
        raise AssertionError("redis still answers after stop")
    except redis.ConnectionError:
        pass


def test_data_survives_a_restart(tmp_path):
    first = EmbeddedRedis(tmp_path)
    client = redis.Redis.from_url(first.start())
    client.rpush("queue", "a", "b")
    first.stop()
    second = EmbeddedRedis(tmp_path)
    try:
        assert redis.Redis.from_url(second.start()).lrange("queue", 0, -1) == [b"a", b"b"]
    finally:
        second.stop()


def test_dies_with_a_killed_parent(tmp_path):
    """A service killed with -9 leaves no orphan redis-server behind (Linux parent-death signal)."""
    script = (
        "from app.redis.embedded import EmbeddedRedis; import time; "
        f"EmbeddedRedis(__import__('pathlib').Path({str(tmp_path)!r})).start(); print('up', flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert parent.stdout is not None and parent.stdout.readline().strip() == b"up"
    port = (tmp_path / "redis" / "redis.port").read_text()
    parent.kill()
    parent.wait()
    eventually_sync(lambda: not _answers(int(port)), 10, what="the embedded redis-server gone with its killed parent")


def _answers(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=0.5).ping())
    except redis.ConnectionError:
        return False


@pytest.mark.parametrize(("durability", "appendfsync"), [("strict", "always"), ("fast", "everysec")])
def test_fsyncs_as_the_durability_setting_says_in_a_session_of_its_own(tmp_path, durability, appendfsync):
    """In its own session, a terminal's Ctrl-C (SIGINT to the service's process group) does not reach it."""
    server = EmbeddedRedis(tmp_path, durability)
    try:
        client = redis.Redis.from_url(server.start(), decode_responses=True)
        assert client.config_get("appendfsync") == {"appendfsync": appendfsync}
        assert server.process is not None and os.getsid(server.process.pid) == server.process.pid != os.getsid(0)
    finally:
        server.stop()
