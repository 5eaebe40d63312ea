"""The response-time buckets and the fixed points of the performance index (PI), shared by the live goal
evaluation (spark_jobs/manager/goals.py) and the nightly report (spark_jobs/workload_activity/transform.py and figures.py), so that both
judge the same requests alike. Pure: no I/O."""

from __future__ import annotations

# Upper limits of the response time buckets, in percent of the goal; a 14th bucket takes everything above 400%.
RESPONSE_BUCKET_LIMITS_PCT: tuple[int, ...] = (50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 200, 400)
BUCKET_COUNT = len(RESPONSE_BUCKET_LIMITS_PCT) + 1
BUCKET_LABELS: tuple[str, ...] = (*(f"<={limit}%" for limit in RESPONSE_BUCKET_LIMITS_PCT), ">400%")
# A response on a limit belongs to that limit's bucket even through float noise: 0.7 ms of a 1 ms goal computes as
# 70.00000000000001%. A relative 1e-9 of the goal is far below any clock's resolution.
BOUNDARY_TOLERANCE = 1e-9
# The limits a response (in percent of the goal) is compared with.
TOLERANT_BUCKET_LIMITS_PCT = tuple(limit * (1 + BOUNDARY_TOLERANCE) for limit in RESPONSE_BUCKET_LIMITS_PCT)
# Buckets 0..5 hold the responses within the goal (≤100%).
WITHIN_GOAL_BUCKETS = RESPONSE_BUCKET_LIMITS_PCT.index(100) + 1

# The service class of work no classification rule matches; its one period is discretionary.
SYSOTHER = "SYSOTHER"
DISCRETIONARY_PI = 0.81
# The >400% bucket has no upper limit, so the distribution cannot say how badly the goal was missed. 4.01 is the
# smallest two-decimal PI above the ≤400% bucket's 4.0: it orders after it without inventing a magnitude.
OVERFLOW_BUCKET_PI = 4.01
# A velocity PI is capped here. Velocity 0 (requests only waited) would divide by zero; a finite cap keeps the PI
# sortable and JSON-serialisable, and 100 is the velocity scale itself: goal velocity ≥ 1 and actual velocity ≤ 1
# is already a hundredfold miss, beyond which a larger number tells the manager nothing more.
MAX_VELOCITY_PI = 100.0


def bucket_pi(index: int) -> float:
    """The PI of a percentile goal whose percentile is reached in bucket `index` (0..13): its limit / 100."""
    if index == len(RESPONSE_BUCKET_LIMITS_PCT):
        return OVERFLOW_BUCKET_PI
    return RESPONSE_BUCKET_LIMITS_PCT[index] / 100
