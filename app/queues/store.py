"""Typed operations on the queues of one application environment on one node, each one Lua script or one Redis
round trip, and on what shares an environment's slot with them: one store, composed of its parts by concern, each in
its own module. The other Redis records are their domains' (connections/records.py, events/advisories.py,
scheduler/election.py and duty_leases.py, work/enclave_records.py and idempotency_routes.py), over the store's
`context`."""

from __future__ import annotations

from app.queues.dead_letters import DeadLetters
from app.queues.delay_figures import DelayReads
from app.queues.environments import Environments
from app.queues.hot_path import RequestQueues
from app.queues.outbox import Outbox
from app.queues.performance import ManagerResults
from app.queues.request_status import RequestStatuses


class QueueStore(RequestQueues, RequestStatuses, DelayReads, DeadLetters, Outbox, Environments, ManagerResults):
    """The hot path of requests (hot_path.py) with the swept parts of queues (sweep.py), a request's own status
    (request_status.py), what the delay samples read (delay_figures.py), their dead letters (dead_letters.py), the
    outbox of ended requests (outbox.py), the environments' state beside their queues (environments.py) and the
    manager's published evaluation and decisions that a select reads (performance.py), over one Redis client and one
    set of scripts (base.py)."""
