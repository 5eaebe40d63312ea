"""The Redis key layout.

Every key of one application environment on one node shares one hash tag, `{<prefix>:<node>:<ae>}`, so every script
touches one slot (Redis Cluster) and can act on all the service-class queues of the environment and on its servers'
capacity at once: select takes the most important class's work and counts it against the server in one atomic step.
Each service-class queue is a pair of lists (dependent work ahead of independent) inside that slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

TOKEN_SEPARATOR = "~"  # never part of a WLM name, so a work token splits back into node, AE and id
TOMBSTONE_BUCKETS = 4  # as lua/includes/tombstones.lua takes them
MAX_CLASS_ORDERS = 64  # an environment's orders of its classes kept (AeKeys.class_queues)


@dataclass(frozen=True)
class AeKeys:
    prefix: str
    node: str
    ae: str

    @cached_property
    def tag(self) -> str:
        return f"{{{self.prefix}:{self.node}:{self.ae}}}"

    @cached_property
    def req(self) -> str:
        return f"{self.tag}:req"

    @cached_property
    def payload(self) -> str:
        return f"{self.tag}:payload"

    @cached_property
    def depth(self) -> str:
        return f"{self.tag}:depth"

    @cached_property
    def classes(self) -> str:
        return f"{self.tag}:classes"

    @cached_property
    def places(self) -> str:
        """Per queue: the last place given at its back, and (`<queue>|chain`) where its swept part begins
        (lua/includes/places.lua)."""
        return f"{self.tag}:places"

    @cached_property
    def holes(self) -> str:
        """Places of requests removed where they stood in their queue (deleted, purged): a zset of equal scores, by
        member `<queue>|<place>|<id>` (lua/includes/places.lua)."""
        return f"{self.tag}:holes"

    @cached_property
    def leases(self) -> str:
        return f"{self.tag}:leases"

    @cached_property
    def inflight(self) -> str:
        return f"{self.tag}:inflight"

    @cached_property
    def servers(self) -> str:
        return f"{self.tag}:servers"

    @cached_property
    def fence(self) -> str:
        """The highest scheduler epoch that acted on this queue: a deposed scheduler's older epoch is refused."""
        return f"{self.tag}:fence"

    @cached_property
    def seen(self) -> str:
        return f"{self.tag}:seen"

    @cached_property
    def records(self) -> str:
        return f"{self.tag}:records"

    @cached_property
    def records_acked(self) -> str:
        """How many records the outbox has ever dropped as written: the position of its first record."""
        return f"{self.tag}:records_acked"

    @cached_property
    def records_incarnation(self) -> str:
        """A random id kept with the outbox's count (lua/pending_records.lua): positions under another are other records."""
        return f"{self.tag}:records_incarnation"

    @cached_property
    def samples(self) -> str:
        """Ended requests of the goal evaluation window (see end_held in lua/includes/end_held.lua)."""
        return f"{self.tag}:samples"

    @cached_property
    def performance(self) -> str:
        """The latest goal evaluation: hash 'class:period' -> JSON."""
        return f"{self.tag}:performance"

    @cached_property
    def assign(self) -> str:
        """The manager's decisions: hash server id -> its home service class."""
        return f"{self.tag}:assign"

    @cached_property
    def retire(self) -> str:
        """The manager's decisions: set of surplus servers, told to end (0C14) at their next select."""
        return f"{self.tag}:retire"

    @cached_property
    def desired(self) -> str:
        """The manager's decisions: hash service class -> servers it should have, and `*` -> the total."""
        return f"{self.tag}:desired"

    @cached_property
    def terminations(self) -> str:
        """Unexpected server terminations (died without IWM4DIS, or failed to start): zset who -> when."""
        return f"{self.tag}:terminations"

    @cached_property
    def start_error(self) -> str:
        """Why the launcher's last start of a server here failed (JSON), until a start succeeds."""
        return f"{self.tag}:start_error"

    @cached_property
    def records_writer(self) -> str:
        """Which service process flushes the outbox for now (one at a time, so a batch is written once)."""
        return f"{self.tag}:records_writer"

    @cached_property
    def exits(self) -> str:
        return f"{self.tag}:exits"

    @cached_property
    def done(self) -> str:
        """Tombstones written before they went to buckets (`<outcome>|<queue manager>`, each until its score in
        `done_exp`): read until the lease duty has forgotten them."""
        return f"{self.tag}:done"

    @cached_property
    def done_exp(self) -> str:
        return f"{self.tag}:done_exp"

    @cached_property
    def tombstones(self) -> list[str]:
        """The tombstones' buckets, taken in turn, each expiring whole (lua/includes/tombstones.lua)."""
        return [f"{self.tag}:done:{n}" for n in range(TOMBSTONE_BUCKETS)]

    @cached_property
    def tombstone_keys(self) -> list[str]:
        """What a script that writes or reads tombstones takes: `done` (the earlier form), then the buckets."""
        return [self.done, *self.tombstones]

    @cached_property
    def buckets(self) -> str:
        """Hash class -> its periods' bucket bounds (app.policy.active.bucket_specs); `histograms` counts ends in them:
        hash `<class>|<period>|<r, q or e>|<bucket 1-14 or sum>` -> count or ms (lua/includes/end_held.lua `histograms`)."""
        return f"{self.tag}:buckets"

    @cached_property
    def histograms(self) -> str:
        return f"{self.tag}:histograms"

    @cached_property
    def dead(self) -> str:
        """Dead letters: hash request id -> JSON {meta, payload, reason} (dead_letter in lua/includes/finish.lua)."""
        return f"{self.tag}:dead"

    @cached_property
    def dead_at(self) -> str:
        """Dead letters by when they died: zset request id -> ms (Redis's clock)."""
        return f"{self.tag}:dead_at"

    @cached_property
    def waiters(self) -> str:
        """Long-polling servers waiting for work here: zset `<process>[@<primary>]:<waiter>` -> wake rank (lua/includes/wake.lua)."""
        return f"{self.tag}:waiters"

    @cached_property
    def served_at(self) -> str:
        """Hash server -> when a select last gave it work (ms): who has waited longest among equals is woken first."""
        return f"{self.tag}:served_at"

    @cached_property
    def promotion(self) -> str:
        """No work starved: hash `tokens`, `due` and `promoted|<class>` -> count (lua/includes/promotion.lua `starved_class`)."""
        return f"{self.tag}:promotion"

    @cached_property
    def notify_channel(self) -> str:
        return notify_channel(self.prefix, self.node, self.ae)

    @cached_property
    def wake_prefix(self) -> str:
        """Followed by a listed waiter's process part: the channel that wakes it (lua/includes/wake.lua)."""
        return wake_prefix(self.prefix)

    def queue(self, service_class: str, dependent: bool) -> str:
        """A queue's front list: what selects take from."""
        return self.front(queue_name(service_class, dependent))

    def front(self, name: str) -> str:
        return f"{self.tag}:q:{name}"

    def rear(self, name: str) -> str:
        """Requests inserted while the queue is swept (or behind what was): they join the front once that came back (app/sweeper)."""
        return f"{self.tag}:rear:{name}"

    def chain(self, name: str) -> str:
        """The database blobs of a swept queue, in queue order (blob ids)."""
        return f"{self.tag}:chain:{name}"

    def class_queues(self, service_classes: list[str]) -> tuple[str, ...]:
        """Per class, most important first: dependent front and rear, then independent front and rear. Kept per
        order of the classes: every select names them, in the few orders its environment's classes come in."""
        order = tuple(service_classes)
        queues = self._class_queues.get(order)
        if queues is None:
            names = [queue_name(sc, dependent) for sc in order for dependent in (True, False)]
            queues = tuple(key for name in names for key in (self.front(name), self.rear(name)))
            if len(self._class_queues) >= MAX_CLASS_ORDERS:
                self._class_queues.clear()
            self._class_queues[order] = queues
        return queues

    @cached_property
    def _class_queues(self) -> dict[tuple[str, ...], tuple[str, ...]]:
        return {}

    @cached_property
    def swept(self) -> str:
        """Queues with a part in the database: hash queue name -> how many of its requests are there."""
        return f"{self.tag}:swept"

    @cached_property
    def sweeping(self) -> str:
        """Sweeps under way: hash queue name -> 'token|part|count|digest' of what the sweep is moving."""
        return f"{self.tag}:sweeping"

    @cached_property
    def swept_deleted(self) -> str:
        """Swept requests deleted (or purged) while in the database: left out when their blob comes back."""
        return f"{self.tag}:swept_deleted"

    @cached_property
    def served(self) -> str:
        """Requests selected per queue since the sweeper last looked: hash queue name -> count (its service rate)."""
        return f"{self.tag}:served"

    def idempotency(self, queue_manager: int, key: str) -> str:
        return f"{self.tag}:idem:{queue_manager}:{key}"

    @cached_property
    def no_idempotency(self) -> str:
        """A placeholder key of the same slot for items without an idempotency key (never written)."""
        return f"{self.tag}:idem:-"

    @cached_property
    def member_prefix(self) -> str:
        """A request's token (of its first life) up to its id: its member in a resource group follows it
        (app/queues/resource_groups.py `member_of`; group_member in lua/includes/groups.lua)."""
        return self.token("")

    def token(self, request_id: str, life: int = 1) -> str:
        """A request's token; a server is given one that names the life it selected past the first (a dead letter
        retried lives again under its id): an end or begin from an earlier life then cannot reach this one."""
        parts = (self.node, self.ae, request_id) if life == 1 else (self.node, self.ae, request_id, str(life))
        return TOKEN_SEPARATOR.join(parts)


def queue_name(service_class: str, dependent: bool) -> str:
    """One of a service class's two queues (dependent work is selected before independent)."""
    return f"{service_class}:{'dep' if dependent else 'ind'}"


def parse_token(token: str) -> tuple[str, str, str] | None:
    parts = token.split(TOKEN_SEPARATOR)
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def parse_held_token(token: str) -> tuple[str, str, str, int] | None:
    """A token a server was given (AeKeys.token): node, AE, id and the life it names."""
    parts = token.split(TOKEN_SEPARATOR)
    if len(parts) == 4 and parts[3].isdigit() and parts[3].isascii() and int(parts[3]) > 1:
        parts, life = parts[:3], int(parts[3])
    else:
        life = 1
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2], life


@dataclass(frozen=True)
class GroupKeys:
    """A resource group's slots, in a slot of their own (the group spans environments and nodes, so no queue's slot
    can hold them): app/queues/resource_groups.py."""

    prefix: str
    group: str

    @cached_property
    def tag(self) -> str:
        return f"{{{self.prefix}:rg:{self.group}}}"

    @cached_property
    def held(self) -> str:
        """Requests of the group selected or begun: zset `<token>|<life>|<deliveries>` -> when taken (ms)."""
        return f"{self.tag}:held"

    @cached_property
    def reserved(self) -> str:
        """Slots taken for a select under way: zset `<reservation>:<slots>` (one member per select) -> until when
        (ms), when they lapse."""
        return f"{self.tag}:reserved"

    @cached_property
    def blocked(self) -> str:
        """Notify channels of the places whose selects left the group's work for lack of slots (woken when one is
        freed); `capped`: how long work waited on the cap, hash `since` (ms, while capped) and `total_ms`, and
        `reserved`: the slots of the `reserved` members."""
        return f"{self.tag}:blocked"

    @cached_property
    def capped(self) -> str:
        return f"{self.tag}:capped"

    @property
    def all(self) -> list[str]:
        return [self.held, self.reserved, self.blocked, self.capped]


def server_limits_key(prefix: str, ae: str) -> str:
    """Server limits set by IWM4SLI over the policy's, for an environment on every node."""
    return f"{prefix}:server-limits:{{{ae}}}"


def retired_key(prefix: str) -> str:
    """Environments gone from the policy whose queues still hold something to finish (records, exits, work)."""
    return f"{prefix}:retired"


def key_changes_channel(prefix: str) -> str:
    """Announces that an API key was revoked or a principal changed: every process forgets the keys it verified."""
    return f"{prefix}:auth:invalidate"


def durability_probe_key(prefix: str) -> str:
    """Written once at startup where Redis refuses CONFIG: its WAITAOF tells whether the server confirms fsyncs."""
    return f"{prefix}:durability:probe"


def notify_channel(prefix: str, node: str, ae: str) -> str:
    # Channels are not keys; one per environment and node wakes the servers waiting for its work in every process.
    return f"{prefix}:notify:{node}:{ae}"


def notify_channel_place(prefix: str, channel: str) -> tuple[str, str]:
    """The node and environment of a notify channel (notify_channel's inverse: a node name has no `:`)."""
    node, _, ae = channel.removeprefix(f"{prefix}:notify:").partition(":")
    return node, ae


def notify_channel_pattern(prefix: str) -> str:
    """Every environment and node's notify channel (AeKeys.notify_channel), which every process hears."""
    return f"{prefix}:notify:*"


def wake_prefix(prefix: str) -> str:
    """A process's wake channels are this followed by its id, and on a cluster a primary's name
    (app/work/long_poll.py, Dispatcher.wake_channel)."""
    return f"{prefix}:wake:"


@lru_cache(maxsize=4096)
def ae_keys(prefix: str, node: str, ae: str) -> AeKeys:
    """The keys of one environment, shared by every request to it: each name is built once, where a new AeKeys per
    request built the twenty-odd names a select passes every time (2-3 % of the service's CPU per lifecycle)."""
    return AeKeys(prefix, node, ae)
