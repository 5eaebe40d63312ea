"""The one error a `wlm` command reports: its message on stderr, and its exit status: 1 by default, INPUT_ERROR for
input the command refuses (as argparse exits for bad arguments)."""

from __future__ import annotations

INPUT_ERROR = 2


class CliError(Exception):
    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status
