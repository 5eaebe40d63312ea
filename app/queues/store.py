"""Typed operations on the queues of one application environment on one node, each one Lua script or one Redis
round trip, and on what shares an environment's slot with them: one store, holding its parts by concern, each in its
own module, over one base. The other Redis records are their domains' (connections/records.py, events/advisories.py,
scheduler/election.py and duty_leases.py, work/enclave_records.py and idempotency_routes.py), over the store's
`context`."""

from __future__ import annotations

from functools import cached_property

from app.queues.dead_letters import DeadLetters
from app.queues.delay_figures import DelayReads
from app.queues.environments import Environments
from app.queues.outbox import Outbox
from app.queues.performance import ManagerResults
from app.queues.request_status import RequestStatuses
from app.queues.transitions import RequestQueues


class QueueStore(RequestQueues):
    """The hot path of requests on the store itself (transitions.py: register, insert, select, begin, extend, end,
    delete, purge, give back), with its parts, each over the store's one Redis client, scripts and settings (base.py):
    `sweep`, the swept parts of queues (sweep.py), and `groups`, the resource groups' slots (resource_groups.py), which
    the hot path calls on; `statuses`, a request's own status (request_status.py); `delays`, what the delay samples
    read (delay_figures.py); `dead_letters` (dead_letters.py); `outbox`, what ended requests leave for the duties
    (outbox.py); `environments`, their state beside their queues (environments.py); `results`, the manager's
    published evaluation and decisions that a select reads (performance.py). A part is built at its first use, then
    is an attribute like any other."""

    @cached_property
    def statuses(self) -> RequestStatuses:
        return RequestStatuses(self)

    @cached_property
    def delays(self) -> DelayReads:
        return DelayReads(self)

    @cached_property
    def dead_letters(self) -> DeadLetters:
        return DeadLetters(self)

    @cached_property
    def outbox(self) -> Outbox:
        return Outbox(self)

    @cached_property
    def environments(self) -> Environments:
        return Environments(self)

    @cached_property
    def results(self) -> ManagerResults:
        return ManagerResults(self)
