"""bench/_lifetimes.py: server processes' lifetimes from the process table, and the server-seconds they add up to."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _lifetimes import Lifetime, Lifetimes, alive_at, server_seconds


def test_server_seconds_clip_each_lifetime_to_the_span() -> None:
    lives = [Lifetime(1, 0.0, 10.0), Lifetime(2, 5.0, 30.0), Lifetime(3, 12.0), Lifetime(4, -5.0, -1.0)]
    assert server_seconds(lives, 0.0, 20.0) == pytest.approx(10 + 15 + 8)
    assert server_seconds(lives, 100.0, 110.0) == 10  # only the one still alive
    assert [alive_at(lives, at) for at in (-2.0, 0.0, 5.0, 10.0, 12.0, 40.0)] == [1, 1, 2, 1, 2, 1]


def test_a_watcher_finds_marked_descendants_from_their_start_to_their_exit() -> None:
    marker = "lifetimes-test-marker"
    before = time.time()
    with Lifetimes(marker, every_s=0.05) as watcher:
        marked = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.8)", marker]) for _ in range(2)]
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.8)"])
        for process in [*marked, other]:
            process.wait()
        ended = time.time()
        time.sleep(0.2)
    assert len(watcher.lifetimes) == 2 and {life.pid for life in watcher.lifetimes} == {p.pid for p in marked}
    for life in watcher.lifetimes:
        assert before - 0.05 <= life.started <= life.ended <= ended + 0.15  # type: ignore[operator]
        assert life.ended - life.started >= 0.7  # type: ignore[operator]
    assert watcher.alive() == 0
