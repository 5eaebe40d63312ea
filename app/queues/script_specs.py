"""Every queue script's KEYS and ARGV (app/redis/script_spec.py): one specification per script in app/queues/lua,
in the words of its header; each call of a script is built by its specification."""

from __future__ import annotations

from app.redis.script_spec import ScriptSpec

# The seven values of one end, as end_held (lua/includes/end_held.lua) reads them.
_PER_END = "per end: id, outcome, result, error, dead_letter, life, tombstone"
_PER_CLASS_QUEUES = "per class: dep_front, dep_rear, ind_front, ind_rear"
_TOMBSTONE_KEYS = "done, done_0, done_1, done_2, done_3"
_REMOVAL_KEYS = f"req, payload, depth, records, exits, {_TOMBSTONE_KEYS}, holes"
_REASSIGN_KEYS = (
    f"req, payload, depth, leases, inflight, servers, records, exits, {_TOMBSTONE_KEYS}, seen, fence, waiters, served_at, dead, "
    f"dead_at, swept, places, holes; {_PER_CLASS_QUEUES}"
)
_SWEEP_KEYS = "req, payload, front, rear, chain, swept, sweeping, fence, places"
_GROUP_KEYS = "per group: held, reserved, blocked, capped"

REGISTER = ScriptSpec.of("register", "servers, seen", "server, registration")
INSERT = ScriptSpec.of(
    "insert",
    "req, payload, depth, classes, places, swept, sweeping, waiters; per queue: front, rear; per item: idempotency",
    "notify_channel, wake_prefix, idempotency_ttl_s, backlog_limit, queues, metas; per queue: queue, service_class; per meta: meta; "
    "per item: id, queue_number, meta_number, payload, idempotency_key",
)
_SELECT_KEYS = (
    f"req, payload, depth, leases, inflight, servers, seen, records, exits, {_TOMBSTONE_KEYS}, samples, assign, retire, swept, "
    f"served, waiters, served_at, dead, dead_at, buckets, histograms, promotion; {_PER_CLASS_QUEUES}"
)
_END_KEYS = f"req, payload, leases, inflight, records, exits, {_TOMBSTONE_KEYS}, samples, dead, dead_at, buckets, histograms"
SELECT = ScriptSpec.of(
    "select",
    _SELECT_KEYS,
    "server, lease_ms, max_items, tombstone_ms, samples_ms, dead_keep_ms, waiter, promotion_ms, promotion_share, ends; "
    f"{_PER_END}; per class: class; per class: tier; optionally per class: group; per group: slots",
)
SELECT_AND_BEGIN = SELECT.named("select_and_begin")
SELECT_GROUPED = ScriptSpec.of(
    "select_grouped",
    f"{_SELECT_KEYS}; {_GROUP_KEYS}",
    "server, lease_ms, max_items, tombstone_ms, samples_ms, dead_keep_ms, waiter, promotion_ms, promotion_share, ends, groups, "
    f"member_prefix, channel; {_PER_END}; per class: class; per class: tier; per class: group; per group: max_in_flight",
)
SELECT_AND_BEGIN_GROUPED = SELECT_GROUPED.named("select_and_begin_grouped")
BEGIN = ScriptSpec.of("begin", f"req, leases, {_TOMBSTONE_KEYS}", "id, server, lease_ms, life")
EXTEND = ScriptSpec.of("extend", "req, leases, seen", "server, lease_ms")
END = ScriptSpec.of(
    "end",
    _END_KEYS,
    f"server, tombstone_ms, samples_ms, dead_keep_ms; {_PER_END}",
)
END_GROUPED = ScriptSpec.of(
    "end_grouped",
    f"{_END_KEYS}; {_GROUP_KEYS}",
    f"server, tombstone_ms, samples_ms, dead_keep_ms, ends, member_prefix; {_PER_END}; per class: class; per class: group; "
    "per group: max_in_flight",
)
DELETE_QUEUED = ScriptSpec.of("delete_queued", _REMOVAL_KEYS, "queue_manager, id, tombstone_ms")
PURGE_QUEUED = ScriptSpec.of("purge_queued", _REMOVAL_KEYS, "queue_manager, cursor, page, tombstone_ms")
REASSIGN_EXPIRED = ScriptSpec.of(
    "reassign_expired",
    _REASSIGN_KEYS,
    "max_deliveries, tombstone_ms, notify_channel, wake_prefix, epoch, batch, dead_keep_ms; per class: class",
)
REASSIGN_SERVER = ScriptSpec.of(
    "reassign_server",
    _REASSIGN_KEYS,
    "max_deliveries, tombstone_ms, notify_channel, wake_prefix, epoch, server, dead_keep_ms; per class: class",
)
CLAIM_EXITS = ScriptSpec.of("claim_exits", "exits", "claim_ms, limit")
PENDING_RECORDS = ScriptSpec.of("pending_records", "records, records_acked, records_incarnation", "limit, incarnation")
ACK_RECORDS = ScriptSpec.of("ack_records", "records, records_acked", "count, first, last")
SWEEP_BEGIN = ScriptSpec.of("sweep_begin", _SWEEP_KEYS, "queue, token, epoch, part, keep, max")
SWEEP_COMMIT = ScriptSpec.of("sweep_commit", _SWEEP_KEYS, "queue, token, epoch; per blob: blob")
SWEEP_ABORT = ScriptSpec.of("sweep_abort", _SWEEP_KEYS, "queue, token, epoch")
UNSWEEP = ScriptSpec.of(
    "unsweep", "req, payload, front, chain, swept, swept_deleted, places", "queue, blob; per request: id, meta, payload"
)
TAKE_SERVED = ScriptSpec.of("take_served", "served", "none")
DELETE_SWEPT = ScriptSpec.of(
    "delete_swept", f"{_REMOVAL_KEYS}, chain, swept, swept_deleted", "outcome, queue_manager, tombstone_ms, queue, blob, id, meta"
)
QUEUE_FIGURES = ScriptSpec.of(
    "queue_figures",
    f"req, swept, servers, inflight, depth, desired, performance, dead_at, leases, histograms, promotion; {_PER_CLASS_QUEUES}",
    "per class: dep_queue, ind_queue",
)
STATUS = ScriptSpec.of(
    "status",
    f"req, {_TOMBSTONE_KEYS}, dead, swept, places, holes, servers, inflight, desired, performance, leases; {_PER_CLASS_QUEUES}",
    "id, swept_meta; per class: class; per class: tier",
)
DELAY_FIGURES = ScriptSpec.of(
    "delay_figures",
    "req, servers, inflight, desired, depth, leases; per class: dep_front, ind_front",
    "scan, held_sample; per class: class, period_ends",
)
DEAD_RETRY = ScriptSpec.of(
    "dead_retry",
    f"req, payload, depth, classes, places, swept, sweeping, waiters, {_TOMBSTONE_KEYS}, dead, dead_at, holes, front, rear",
    "id, queue, position, notify_channel, wake_prefix",
)
DEAD_DISCARD = ScriptSpec.of("dead_discard", "dead, dead_at", "per request: id")
GROUP_TAKE = ScriptSpec.of("group_take", _GROUP_KEYS, "want, reservation, hold_ms; per group: max_in_flight")
GROUP_SETTLE = ScriptSpec.of(
    "group_settle", _GROUP_KEYS, "per group: reservation, slots, max_in_flight, holding, releasing, short; per member: member"
)

SPECS = (
    REGISTER,
    INSERT,
    SELECT,
    SELECT_AND_BEGIN,
    SELECT_GROUPED,
    SELECT_AND_BEGIN_GROUPED,
    BEGIN,
    EXTEND,
    END,
    END_GROUPED,
    DELETE_QUEUED,
    PURGE_QUEUED,
    REASSIGN_EXPIRED,
    REASSIGN_SERVER,
    CLAIM_EXITS,
    PENDING_RECORDS,
    ACK_RECORDS,
    SWEEP_BEGIN,
    SWEEP_COMMIT,
    SWEEP_ABORT,
    UNSWEEP,
    TAKE_SERVED,
    DELETE_SWEPT,
    QUEUE_FIGURES,
    STATUS,
    DELAY_FIGURES,
    DEAD_RETRY,
    DEAD_DISCARD,
    GROUP_TAKE,
    GROUP_SETTLE,
)
