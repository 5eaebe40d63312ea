"""Child processes that must not outlive the service: the embedded Redis, the launcher's servers, the records
writer."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """In a child before exec: get SIGTERM when the parent dies, even by kill -9 (Linux). A child that sets this up
    only after starting (a spawned process, seconds of imports later under load) names its `parent`: if that one
    died before, no signal would ever come, so the child ends itself at once."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass  # not Linux: the child outlives a crashed parent, and the next start reuses it by its port file
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def process_alive(pid: int | None) -> bool:
    """Whether a process of that id runs (one of another user's counts: it exists)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
