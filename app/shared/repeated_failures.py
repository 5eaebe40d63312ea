"""Failures that recur every tick of a background loop, logged when they start and when they clear, not each time."""

from __future__ import annotations

import logging


class RepeatedFailures:
    """Per subject (an environment, a class period), the kind of failure it is in: a new kind is logged once as a
    warning, with the detail of its first occurrence, and the subject's recovery once at info; the same kind again
    says nothing, whatever its detail (counts and values that change from tick to tick)."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self._failing: dict[str, str] = {}

    def failed(self, subject: str, kind: str, detail: str = "", exc: BaseException | None = None) -> None:
        """`exc`: the exception behind it, whose traceback comes with the first report."""
        if self._failing.get(subject) != kind:
            self._failing[subject] = kind
            said = f"{kind} ({detail})" if detail else kind
            self.log.warning("%s: %s; said once until it changes or clears", subject, said, exc_info=exc)

    def succeeded(self, subject: str) -> None:
        if self._failing.pop(subject, None) is not None:
            self.log.info("%s: recovered", subject)

    @property
    def failing(self) -> dict[str, str]:
        return dict(self._failing)
