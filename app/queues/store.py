"""Typed operations on the queues of one application environment on one node, each one Lua script or one Redis
round trip, and on what the service keeps beside them: one store, composed of its parts by concern, each in its own
module."""

from __future__ import annotations

from app.queues.advisories import Advisories
from app.queues.connections import ConnectionRecords
from app.queues.dead_letters import DeadLetters
from app.queues.election import SchedulerElection
from app.queues.enclaves import EnclaveRecords
from app.queues.environments import Environments
from app.queues.hot_path import RequestQueues
from app.queues.idempotency import IdempotencyRoutes
from app.queues.leases import DutyLeases
from app.queues.outbox import Outbox
from app.queues.performance import ManagerResults
from app.queues.request_status import RequestStatuses


class QueueStore(
    RequestQueues,
    RequestStatuses,
    DeadLetters,
    IdempotencyRoutes,
    EnclaveRecords,
    ConnectionRecords,
    Outbox,
    Environments,
    ManagerResults,
    DutyLeases,
    SchedulerElection,
    Advisories,
):
    """The hot path of requests (hot_path.py) with the swept parts of queues (sweep.py), a request's own status
    (request_status.py), their dead letters (dead_letters.py), where idempotency keys were routed (idempotency.py),
    enclaves (enclaves.py), connection records and departed queue managers (connections.py), the outbox of ended
    requests (outbox.py), the environments' state beside their queues (environments.py), the manager's published
    evaluation and decisions (performance.py), duty leases (leases.py), the scheduler election (election.py) and the
    advisories' stream (advisories.py), over one Redis client and one set of scripts (base.py)."""
