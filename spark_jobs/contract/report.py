"""The report's intervals, as the job computes them and the service stores and serves them."""

from __future__ import annotations

# The whole-day row's interval length.
WHOLE_DAY_MINUTES = 1440


def divides_the_day(minutes: int) -> bool:
    """Whether report intervals of `minutes` tile a day (the whole-day row is one of 1440)."""
    return 0 < minutes <= WHOLE_DAY_MINUTES and WHOLE_DAY_MINUTES % minutes == 0
