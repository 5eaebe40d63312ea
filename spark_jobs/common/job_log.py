"""What a job run shows its user, and what it keeps for a closer look: a line per stage on stderr, and in a log file
those lines, the details of each stage, the driver JVM's own output (its warnings, Spark's logging, what the JVM
prints as it writes its class archive) and, if the run fails, the whole traceback. A failure reaches the user as one
line saying why, and the log's path.

The log is appended to, never replaced: a rerun keeps the earlier runs' details above its own."""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Self, TextIO

# A line JobLog writes (`_line`): the job's name, the seconds since the run started.
_OWN_LINE = re.compile(r"\[\S+ +\d+\.\ds\] ")


class JobFailed(Exception):
    """A job run that failed: the message says why in a line, and where the details are."""


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


class JobLog:
    """The log of one run of `job` (its name in every line), open while the run lasts."""

    def __init__(self, job: str, path: Path) -> None:
        self.job = job
        self.path = path
        self.started = time.monotonic()
        path.parent.mkdir(parents=True, exist_ok=True)
        # Line-buffered: the driver's JVM writes to this file too (both append, so neither overwrites the other's
        # lines), and a line must be in the file before the JVM's next one.
        self.file: TextIO = path.open("a", buffering=1, encoding="utf-8")
        self.detail(f"started at {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC by process {os.getpid()}: {' '.join(sys.argv)}")

    def _line(self, message: str) -> str:
        return f"[{self.job} {time.monotonic() - self.started:6.1f}s] {message}\n"

    @staticmethod
    def wrote(line: str) -> bool:
        """Whether `line` of a log's file is one a JobLog wrote, not the driver JVM's (which writes there too)."""
        return _OWN_LINE.match(line) is not None

    def stage(self, message: str) -> None:
        """A step of the run, for the user (stderr) and the log."""
        line = self._line(message)
        sys.stderr.write(line)
        sys.stderr.flush()
        self.file.write(line)

    def detail(self, message: str) -> None:
        """What only someone looking closer needs: to the log alone."""
        self.file.write(self._line(message))

    def failed(self, error: BaseException, reason: str | None = None) -> JobFailed:
        """The failure the user sees for `error` (its `reason`, else the first line of its message), its traceback
        written to the log."""
        self.detail("failed:\n" + "".join(traceback.format_exception(error)).rstrip())
        return JobFailed(f"{self.job} failed: {reason or _first_line(error)}\ndetails: {self.path}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, error_type: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        try:
            # A JobFailed is already in the log; an interrupt is the user's own doing and stays one.
            if isinstance(error, Exception) and not isinstance(error, JobFailed):
                raise self.failed(error) from error
        finally:
            self.file.close()
