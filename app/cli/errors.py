"""The one error a `wlm` command reports: its message on stderr, exit status 1."""

from __future__ import annotations


class CliError(Exception):
    pass
