"""Real service processes for end-to-end and crash tests: `wlm serve` on embedded defaults in a scratch
directory, started, killed and started again on the same data."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.waiting import eventually_sync

WLM = str(Path(sys.executable).parent / "wlm")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServiceProcess:
    def __init__(self, directory: Path, **settings: str) -> None:
        self.dir = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WLM_")}
        self.env |= {"WLM_DATA_DIR": str(directory / "data"), "WLM_PORT": str(self.port), "WLM_LAUNCHER": "false"}
        self.env |= {f"WLM_{name.upper()}": value for name, value in settings.items()}
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = directory / "service.log"

    def start(self, timeout: float = 60, *, own_session: bool = False) -> None:
        """`own_session`: the service leads a process group of its own, as in a terminal, so `interrupt` can reach it."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [WLM, "serve"], cwd=self.dir, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=own_session
            )
        try:
            eventually_sync(self._ready, timeout, what=lambda: f"the service ready:\n{self.log_path.read_text()}")
        except AssertionError:
            self.kill()
            raise

    def _ready(self) -> bool:
        assert self.process is not None and self.process.poll() is None, self.log_path.read_text()
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def wlm(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`wlm ARGS...` as an operator runs it against this service (its data directory holds the admin key)."""
        return subprocess.run([WLM, *args], check=False, cwd=self.dir, env=self.env, capture_output=True, text=True, timeout=60)

    def interrupt(self) -> None:
        """Ctrl-C in the service's terminal: SIGINT to its whole process group (see `start`)."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)

    @classmethod
    def running(cls, directory: Path, **settings: str) -> Iterator[ServiceProcess]:
        """A started service, stopped afterwards: what a fixture yields from."""
        process = cls(directory, **settings)
        process.start()
        try:
            yield process
        finally:
            if process.process is not None and process.process.poll() is None:
                process.stop()

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def kill(self) -> None:
        """kill -9: no shutdown code runs in the service."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def processes_of(data_dir: str) -> list[int]:
    """Live processes whose environment names this data directory (children inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().split(") ", 1)[1][0]
            except OSError:
                continue
            if f"WLM_DATA_DIR={data_dir}".encode() in environ.split(b"\0") and state != "Z":
                found.append(int(entry.name))
    return found
