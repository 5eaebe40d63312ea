"""Child processes that must not outlive the service (app/processes.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

CHILD = "import sys; from app.processes import die_with_parent; die_with_parent(int(sys.argv[1])); print('alive')"


def test_a_child_whose_parent_is_still_there_goes_on() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(os.getpid())], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "alive\n")


def test_a_child_whose_parent_died_before_it_set_up_the_signal_ends_itself() -> None:
    """The parent it names is not its parent any more (here: never was), as after a parent's death while the child
    was still importing: no death signal would ever come, so it ends at once."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(os.getpid() + 1_000_000)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (-signal.SIGTERM, "")
