"""What the what-if replay (spark_jobs/what_if/) reads of the work records, and what they lack for it
(docs/work-records.md). Imports nothing (the replay's Spark tasks read it).

- A request's classification qualifiers are not recorded, only the columns of REPLAY_QUALIFIERS, by the qualifier
  each stands for: the replay keeps a request's recorded class where the candidate classifies its subsystem type by
  the same rules as the version that classified it, and classifies it again from these alone elsewhere.
- Servers' starts and ends are not recorded: the replay's start latency is given (its default: none), and the
  recorded day has no servers connected or wanted to compare with.
- The manager's settings (goal interval and window, blocked promotion) are not recorded: the replay takes them as
  given (their default: the service's settings where it runs).
"""

from __future__ import annotations

REPLAY_QUALIFIERS = {"UI": "userid", "SI": "subsystem_name"}
