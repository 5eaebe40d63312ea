"""Failures that recur every tick of a background loop, logged when they start and when they clear, not each time."""

from __future__ import annotations

import logging


class RepeatedFailures:
    """Per subject (an environment, a class period), the failure it is in: a new or different failure is logged once
    as a warning, and the subject's recovery once at info; the same failure again says nothing."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self._failing: dict[str, str] = {}

    def failed(self, subject: str, failure: str, exc: BaseException | None = None) -> None:
        """`exc`: the exception behind it, whose traceback comes with the first report."""
        if self._failing.get(subject) != failure:
            self._failing[subject] = failure
            self.log.warning("%s: %s (logged once until it changes or clears)", subject, failure, exc_info=exc)

    def succeeded(self, subject: str) -> None:
        if self._failing.pop(subject, None) is not None:
            self.log.info("%s: recovered", subject)

    @property
    def failing(self) -> dict[str, str]:
        return dict(self._failing)
