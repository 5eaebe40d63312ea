"""Shared by the benchmarks: the lifetimes of server processes, from process start to exit, found in the process
table (Linux /proc) whoever started them, so that servers a service launches and workers a benchmark starts
itself are counted the same way.

A `Lifetimes` watcher walks the process tree under a root process (its threads' `children` files) every `every_s`
seconds in a thread of its own. A process whose command line holds the marker is a server: its start is the
kernel's (its /proc stat `starttime`, in clock ticks since boot: 10 ms), its end the midpoint between the last walk
that saw it and the first that did not (within every_s / 2). Server-seconds over a span are the lifetimes clipped
to it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Lifetime:
    pid: int
    started: float  # epoch seconds
    ended: float | None = None  # None: alive at the last walk


def server_seconds(lifetimes: Iterable[Lifetime], start: float, end: float) -> float:
    """The servers' seconds alive within [start, end); one still alive counts to `end`."""
    return sum(max(0.0, min(end, life.ended if life.ended is not None else end) - max(start, life.started)) for life in lifetimes)


def alive_at(lifetimes: Iterable[Lifetime], at: float) -> int:
    """How many servers were alive at `at`."""
    return sum(life.started <= at and (life.ended is None or at < life.ended) for life in lifetimes)


def _boot_epoch() -> float:
    """The epoch time of the boot, to 10 ms: now less the uptime (which counts as process start times do)."""
    return time.time() - float(Path("/proc/uptime").read_text().split()[0])


def _children(pid: int) -> list[int]:
    found = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                found.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:
                continue
    except OSError:
        pass
    return found


def _identity(pid: int) -> tuple[int, str] | None:
    """The process's start (clock ticks since boot) and command line; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19]), command


class Lifetimes:
    """Watches for server processes (command line holding `marker`) under `root` (default: this process) from
    `start()` to `stop()`; `lifetimes` has each one seen."""

    def __init__(self, marker: str, root: int | None = None, every_s: float = 0.1) -> None:
        self.marker, self.root, self.every_s = marker, root or os.getpid(), every_s
        self.lifetimes: list[Lifetime] = []
        self._alive: dict[tuple[int, int], Lifetime] = {}  # (pid, start ticks): its lifetime
        self._boot = _boot_epoch()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lifetimes {marker}", daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> Lifetimes:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop watching: the servers still alive at the last walk keep no end."""
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()

    def alive(self) -> int:
        with self._lock:
            return len(self._alive)

    def _walk(self) -> set[tuple[int, int]]:
        seen, pending = set(), _children(self.root)
        while pending:
            pid = pending.pop()
            identity = _identity(pid)
            if identity is None:
                continue
            ticks, command = identity
            if self.marker in command:
                seen.add((pid, ticks))
            pending.extend(_children(pid))
        return seen

    def _run(self) -> None:
        last = time.time()
        while True:
            seen = self._walk()
            now = time.time()
            with self._lock:
                for key in seen - self._alive.keys():
                    life = Lifetime(key[0], self._boot + key[1] / TICKS)
                    self._alive[key] = life
                    self.lifetimes.append(life)
                for key in self._alive.keys() - seen:
                    self._alive.pop(key).ended = (last + now) / 2
            last = now
            if self._stop.wait(self.every_s):
                return
