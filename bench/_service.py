"""Shared by the benchmarks: start the real service (`wlm serve`, embedded Redis) in a scratch directory,
wait until it is ready, and stop it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
WLM = str(Path(sys.executable).parent / "wlm")
ADMIN_KEY = "wlm_bench-admin-key-0123456789abcdefghijklmnopqrstuvwxyz"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    def __init__(self, workers: int = 1, **settings: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="wlm-bench-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("WLM_")}
        env |= {
            "WLM_DATA_DIR": str(self.dir / "data"),
            "WLM_PORT": str(self.port),
            "WLM_WORKERS": str(workers),
            "WLM_BOOTSTRAP_ADMIN_KEY": ADMIN_KEY,
            "WLM_LOG_LEVEL": "warning",
            "WLM_LAUNCHER": "false",  # a benchmark that wants servers started by the service says so
            **{f"WLM_{k.upper()}": v for k, v in settings.items()},
        }
        self.log = (self.dir / "service.log").open("wb")
        self.process = subprocess.Popen([WLM, "serve"], cwd=self.dir, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("the service did not start:\n" + (self.dir / "service.log").read_text())

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{(self.dir / 'data' / 'redis' / 'redis.port').read_text().strip()}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


def machine() -> str:
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


RQ_SERIALIZER = "rq.serializers.JSONSerializer"


@contextmanager
def rq_workers(redis_url: str, queue: str, count: int) -> Iterator[None]:
    """`count` RQ SimpleWorker processes on `queue`, started (and given 2 s to start) before the body, stopped after it."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rq.cli", "worker", "--url", redis_url, "--worker-class", "rq.worker.SimpleWorker",
             "--serializer", RQ_SERIALIZER, "--quiet", queue],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]  # fmt: skip
    try:
        time.sleep(2.0)  # let the workers start before the clock does
        yield
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
