"""The what-if replay's engine: a discrete-event simulation of one application environment under a candidate policy
(pure: no I/O, no Spark; deterministic for a seed).

It runs the service's own rules (spark_jobs/manager/): every `interval_s` the manager judges each class period on
the requests ended within the window (`goals.evaluate`) and decides the servers (`servers.decide`); the launcher
starts what the decision lacks (`servers.servers_to_start`), each server connecting after a start latency drawn
from those recorded; a server takes work in the select order (`select_order`: importance, its home class, group
caps, dependent before independent, FIFO, promotion of blocked work), and a retired server ends what it holds and
goes. Its inputs are only the arrivals (time, class, execution time), the start latencies and the policy: nothing
of what the recorded day's servers did.

What it leaves out, as the service would see it: failures and redeliveries, the completion time, overflow servers,
the sweeper, IWM4SLI limits set at run time, other environments sharing a resource group (each replays alone), and
the delays of the service itself (a select, a wake-up, a long poll's timeout: all instant here). A waiting server
is woken for new work least recently served first, as the service wakes them; an idle retired server goes at once.
"""

from __future__ import annotations

import heapq
import math
import random
from array import array
from collections import deque
from collections.abc import Sequence

import numpy as np

from spark_jobs.manager.select_order import (
    Promotion,
    PromotionBucket,
    Queued,
    RankedClass,
    class_order,
    due,
    granted_slots,
    importance_rank,
    look_order,
    preferred_order,
    select,
)
from spark_jobs.manager.servers import ClassFigures, decide, servers_to_start
from spark_jobs.what_if.intervals import Timeline, summarise
from spark_jobs.what_if.model import Arrival, Arrivals, Environment, ManagerSettings, Replay, ServedColumns
from spark_jobs.what_if.window import Window

# The timed events (besides arrivals and decisions). At one instant ends come first, so that what arrives with them
# is served by the servers they free, then connects, then arrivals, and the decision last, seeing all of them.
_END, _CONNECT = 0, 1
_NONE_UNDER: frozenset[str] = frozenset()


class _Server:
    __slots__ = ("free", "home", "id", "retiring", "served_at", "since")

    def __init__(self, server_id: int, tasks: int, now: float) -> None:
        self.id = server_id
        self.free = tasks
        self.home: str | None = None
        self.retiring = False
        self.served_at = -1.0  # when it was last given work: the least recently served is woken first
        self.since = now  # when its current home began (for the server-seconds per class)


class _Replay:
    def __init__(self, environment: Environment, arrivals: Arrivals, latencies: Sequence[float], settings: ManagerSettings, seed: int):
        self.env = environment
        self.arrivals = arrivals
        self.at = arrivals.at_s
        self.latencies = list(latencies)
        self.settings = settings
        self.rng = random.Random(seed)
        ranks = {c.name: importance_rank(c.periods[0].importance, c.periods[0].goal.type == "discretionary") for c in environment.classes}
        self.order = class_order(ranks)
        self.specs = {c.name: c for c in environment.classes}
        self.ranked = [RankedClass(name, ranks[name], self.specs[name].resource_group) for name in self.order]
        self.groups = {g.name: g for g in environment.resource_groups}
        self.group_of = {c.name: c.resource_group for c in environment.classes if c.resource_group is not None}
        self.group_caps: dict[str, tuple[str, int]] = {}
        for name, group in self.group_of.items():
            if (cap := self.groups[group].max_in_flight) is not None:
                self.group_caps[name] = (group, cap)
        self.min_groups = {g: group.min_in_flight for g, group in self.groups.items() if group.min_in_flight is not None}
        self.looks: dict[tuple[frozenset[str], str | None], list[str]] = {}  # the look order by groups under min and home
        self.in_flight = dict.fromkeys(self.groups, 0)
        self.queues: dict[str, tuple[deque[int], deque[int]]] = {name: (deque(), deque()) for name in self.order}
        unknown = sorted(set(arrivals.classes) - set(self.queues))
        if unknown:
            first = next(n for n, index in enumerate(arrivals.service_class) if arrivals.classes[index] in unknown)
            raise ValueError(f"arrival {first} is of service class {unknown[0]!r}, which the environment does not have")
        self.names = arrivals.classes  # by the arrivals' class index
        self.execution = arrivals.execution_s
        self.class_queues = [self.queues[name] for name in arrivals.classes]
        self.queued = 0
        self.promotion = Promotion(settings.promotion_s * 1000, settings.promotion_share)
        self.bucket = PromotionBucket()
        n = len(arrivals)
        self.selected = array("d", [math.nan]) * n
        self.ended = array("d", [math.nan]) * n
        self.promoted = bytearray(n)
        self.window = Window(environment.classes, arrivals, self.selected, self.ended)
        self.ended_requests = self.window.requests.append
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, kind, sequence, server, request)
        self.sequence = 0
        self.servers: dict[int, _Server] = {}
        self.next_server = 1
        self.starting = 0
        self.waiting: list[tuple[float, int]] = []  # (served_at, server id), stale entries skipped
        self.timeline = Timeline()
        self.decisions = self.started = self.retired = 0

    # -- events --------------------------------------------------------------------------------------------------

    def push(self, at: float, kind: int, server: int = 0, request: int = 0) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, kind, self.sequence, server, request))

    def run(self, until_s: float) -> None:
        at_s, n = self.at, len(self.at)
        in_order = all(at_s[i] <= at_s[i + 1] for i in range(n - 1))
        by_time: Sequence[int] = range(n) if in_order else sorted(range(n), key=at_s.__getitem__)
        next_arrival = 0
        decide_at = 0.0
        events = self.events
        inf = math.inf
        while True:
            at = events[0][0] if events else inf
            # The arrivals before the next event, up to the next decision (most of a day's steps), one by one.
            while next_arrival < n:
                request = by_time[next_arrival]
                now = at_s[request]
                if now >= at or now > decide_at or now >= until_s:
                    break
                next_arrival += 1
                if not self.queued and self.waiting and self.served_at_once(now, request):
                    at = events[0][0]
                    continue
                self.arrive(request)
                if self.waiting:
                    self.dispatch(now)
                    at = events[0][0] if events else inf
            arrival_at = at_s[by_time[next_arrival]] if next_arrival < n else inf
            now = at if at < arrival_at else arrival_at
            if decide_at < now:
                now = decide_at
            if now >= until_s:
                break
            if at <= now:
                _, kind, _, server_id, request = heapq.heappop(events)
                if kind == _END:
                    self.end(now, server_id, request)
                else:
                    self.connect(now)
            elif arrival_at <= now:
                self.arrive(by_time[next_arrival])
                next_arrival += 1
            else:
                self.decide(now)
                decide_at = self.decisions * self.settings.interval_s
            if self.queued and self.waiting:
                self.dispatch(now)
        for server in list(self.servers.values()):
            self.timeline.connected(server.since, until_s, server.home)

    def arrive(self, request: int) -> None:
        self.class_queues[self.arrivals.service_class[request]][0 if self.arrivals.dependent[request] else 1].append(request)
        self.queued += 1

    def served_at_once(self, now: float, request: int) -> bool:
        """An arrival with nothing queued, taken by the server `dispatch` would wake first if that one is free and
        no class has a group: what `arrive`, `dispatch` and `take_ungrouped` do then (the lone request taken,
        nothing starved, the bucket's due time a promotion time on if it was due), without the queue. False: not
        so, nothing done."""
        if self.groups:
            return False
        served_at, server_id = self.waiting[0]
        server = self.servers.get(server_id)
        if server is None or server.retiring or not server.free or server.served_at != served_at:
            return False
        now_ms, bucket = now * 1000, self.bucket
        due_ms = now_ms + self.promotion.after_ms if due(bucket, now_ms) else bucket.due_ms
        tokens = min(1.0, bucket.tokens + self.promotion.share)
        if tokens != bucket.tokens or due_ms != bucket.due_ms:  # mostly full and not due: the same bucket
            self.bucket = PromotionBucket(tokens, due_ms)
        self.selected[request] = now  # `start`, inline: most requests are served so
        self.sequence += 1
        heapq.heappush(self.events, (now + self.execution[request], _END, self.sequence, server_id, request))
        server.free -= 1
        server.served_at = now
        if server.free:
            heapq.heapreplace(self.waiting, (now, server_id))
        else:
            heapq.heappop(self.waiting)
        return True

    def connect(self, now: float) -> None:
        self.starting -= 1
        server = _Server(self.next_server, self.env.worker_tasks, now)
        self.next_server += 1
        self.servers[server.id] = server
        heapq.heappush(self.waiting, (server.served_at, server.id))

    def end(self, now: float, server_id: int, request: int) -> None:
        self.ended[request] = now
        self.ended_requests(request)  # the window's sample, judged at the next decision
        if self.group_of:
            group = self.group_of.get(self.names[self.arrivals.service_class[request]])
            if group is not None:
                self.in_flight[group] -= 1
        server = self.servers[server_id]
        server.free += 1
        if server.retiring:
            if server.free == self.env.worker_tasks:
                self.leave(now, server)
            return
        if self.queued or due(self.bucket, now * 1000):  # the select that carries the end comes first
            self.take(now, server)
        if server.free:
            heapq.heappush(self.waiting, (server.served_at, server.id))

    def leave(self, now: float, server: _Server) -> None:
        self.timeline.connected(server.since, now, server.home)
        del self.servers[server.id]
        self.retired += 1

    # -- selects -------------------------------------------------------------------------------------------------

    def dispatch(self, now: float) -> None:
        """Wake waiting servers, least recently served first, while work is queued and they take some."""
        while self.queued and self.waiting:
            served_at, server_id = self.waiting[0]
            server = self.servers.get(server_id)
            if server is None or server.retiring or not server.free or server.served_at != served_at:
                heapq.heappop(self.waiting)
                continue
            if not self.take(now, server):
                return  # nothing this server may take, so nothing any may: the order differs, not what is open
            if server.free:
                heapq.heappush(self.waiting, (server.served_at, server.id))

    def look(self, home: str | None) -> list[str]:
        """The order in which a server of `home` looks at the classes now (`preferred_order`, `look_order`)."""
        under = frozenset(g for g, least in self.min_groups.items() if self.in_flight[g] < least) if self.min_groups else _NONE_UNDER
        order = self.looks.get((under, home))
        if order is None:
            order = self.looks[(under, home)] = look_order(preferred_order(self.ranked, under), home)
        return order

    def take(self, now: float, server: _Server) -> int:
        """One select of `server` for its free tasks; returns how many it took."""
        if not self.groups:
            return self.take_ungrouped(now, server)
        at_s = self.at
        queued = {}
        for name, (dependent, independent) in self.queues.items():
            if dependent or independent:
                oldest = min(at_s[dependent[0]], at_s[independent[0]]) if dependent and independent else at_s[(dependent or independent)[0]]
                queued[name] = Queued(len(dependent), len(independent), oldest * 1000)
        slots = {g: granted_slots(server.free, group.max_in_flight, self.in_flight[g]) for g, group in self.groups.items()}
        selection = select(
            self.look(server.home),
            queued,
            want=server.free,
            now_ms=now * 1000,
            bucket=self.bucket,
            promotion=self.promotion,
            group_of=self.group_of,
            slots=slots,
        )
        self.bucket = selection.bucket
        for take in selection.takes:
            queue = self.queues[take.service_class][0 if take.dependent else 1]
            for _ in range(take.count):
                self.start(now, server, queue.popleft(), take.promoted)
            group = self.group_of.get(take.service_class)
            if group is not None:
                self.in_flight[group] += take.count
        return self.took(now, server, selection.count)

    def take_ungrouped(self, now: float, server: _Server) -> int:
        """`take` where no class has a resource group (most environments): `select`'s choices made on the queues
        themselves, without building its inputs: the starved class first when the bucket is due (`_starved`: the
        oldest head, past the promotion time, of the classes after the first with work), then the classes in the
        server's look order, each dependent work first."""
        now_ms = now * 1000
        bucket, queues, after_ms = self.bucket, self.queues, self.promotion.after_ms
        due_ms, starved, want, taken = bucket.due_ms, None, server.free, 0
        order = self.look(server.home)
        if due(bucket, now_ms):
            due_ms, oldest, first = now_ms + after_ms, math.inf, True
            at_s = self.at
            for name in order:
                dependent, independent = queues[name]
                if not (dependent or independent):
                    continue
                if first:
                    first = False
                    continue
                head = min(at_s[dependent[0]], at_s[independent[0]]) if dependent and independent else at_s[(dependent or independent)[0]]
                inserted = head * 1000
                if inserted + after_ms > now_ms:
                    due_ms = min(due_ms, inserted + after_ms)
                elif inserted < oldest:
                    starved, oldest = name, inserted
        tokens = bucket.tokens
        if starved is not None:
            dependent, independent = queues[starved]
            self.start(now, server, (dependent or independent).popleft(), True)
            tokens -= 1
            due_ms, taken = now_ms, 1  # it may hold more such requests: look again as soon as a token is back
        if taken < want:
            for name in order:
                dependent, independent = queues[name]
                if not (dependent or independent):
                    continue
                for queue in (dependent, independent):
                    for _ in range(min(want - taken, len(queue))):
                        self.start(now, server, queue.popleft(), False)
                        taken += 1
                if taken >= want:
                    break
        self.bucket = PromotionBucket(min(1.0, tokens + self.promotion.share * taken), due_ms)
        return self.took(now, server, taken)

    def start(self, now: float, server: _Server, request: int, promoted: bool) -> None:
        self.selected[request] = now
        self.promoted[request] = promoted
        self.sequence += 1  # `push`, inline: once per request
        heapq.heappush(self.events, (now + self.execution[request], _END, self.sequence, server.id, request))

    def took(self, now: float, server: _Server, taken: int) -> int:
        if taken:
            self.queued -= taken
            server.free -= taken
            server.served_at = now
        return taken

    # -- the manager ---------------------------------------------------------------------------------------------

    def decide(self, now: float) -> None:
        """Judge the window (as app/servers/performance.py), decide (as app/servers/service.py), start servers (as the
        launcher), retire what the decision says."""
        self.decisions += 1
        window_s = self.settings.window_s
        self.window.since(now - window_s)  # the samples from now - window on, as the service reads them
        classes = []
        for name in self.order:
            spec = self.specs[name]
            ended, pi, avg_execution_ms = self.window.judged(name, spec)
            queued = sum(map(len, self.queues[name]))
            first = spec.periods[0]
            classes.append(ClassFigures(name, first.goal, first.importance, ended / window_s, avg_execution_ms, pi, queued))
        decision = decide(
            classes,
            self.env.limits,
            {sid: server.home for sid, server in self.servers.items()},
            tasks_per_server=self.env.worker_tasks if self.servers else 1,
            drain_s=self.settings.interval_s,
            group_caps=self.group_caps,
            retire_surplus=self.env.starts_servers,
        )
        self.timeline.wanted(now, decision.desired)
        retired = set(decision.retired)
        for sid, server in list(self.servers.items()):
            home = decision.homes.get(sid)
            if home != server.home:
                self.timeline.connected(server.since, now, server.home)
                server.home, server.since = home, now
            was_retiring, server.retiring = server.retiring, sid in retired
            if server.retiring and server.free == self.env.worker_tasks:
                self.leave(now, server)
            elif was_retiring and not server.retiring and server.free:
                heapq.heappush(self.waiting, (server.served_at, server.id))
        for _ in range(
            servers_to_start(sum(decision.desired.values()), self.env.limits, len(self.servers), len(self.servers) + self.starting)
        ):
            self.starting += 1
            self.started += 1
            self.push(now + (self.rng.choice(self.latencies) if self.latencies else 0.0), _CONNECT)

    def served(self) -> ServedColumns:
        """Each request as served, the period its response time reached (`period_number`, over the columns)."""
        at_s, ended, classes = self.at, self.ended, self.arrivals.service_class
        response_ms = (np.frombuffer(ended, dtype=np.float64) - np.frombuffer(at_s, dtype=np.float64)) * 1000
        class_of = np.frombuffer(classes, dtype=np.uint16)
        periods = np.zeros(len(at_s), dtype=np.int8)
        for index, name in enumerate(self.names):
            durations = [p.duration_ms for p in self.specs[name].periods]
            # The response times at which a request moves on: the periods' running totals, up to an open-ended one.
            bounds: list[int] = []
            for duration_ms in durations[:-1]:
                if duration_ms is None:
                    break
                bounds.append((bounds[-1] if bounds else 0) + duration_ms)
            done = (class_of == index) & ~np.isnan(response_ms)
            moved_on = np.searchsorted(np.array(bounds, dtype=np.float64), response_ms[done], side="right")
            periods[done] = 1 + moved_on
        period = array("b")
        period.frombytes(periods.tobytes())
        return ServedColumns(self.names, classes, at_s, self.selected, ended, period, self.promoted)


def simulate(
    environment: Environment,
    arrivals: Arrivals | Sequence[Arrival],
    start_latencies_s: Sequence[float],
    *,
    until_s: float,
    settings: ManagerSettings | None = None,
    interval_s: float = 900.0,
    seed: int = 0,
) -> Replay:
    """Replay `arrivals` in `environment` from 0 to `until_s` seconds: the manager deciding every
    `settings.interval_s` (the service's defaults unless given) from the start, servers connecting a start latency
    (drawn from `start_latencies_s` by `seed`; none given: at once) after the launcher starts them. The figures are
    per `interval_s` (the report's 15 minutes by default) and over the whole replay; requests not ended by `until_s`
    are left unended, their work counted as had."""
    if until_s <= 0 or interval_s <= 0:
        raise ValueError(f"until_s and interval_s must be > 0, got {until_s!r}, {interval_s!r}")
    if not all(latency >= 0 for latency in start_latencies_s):
        raise ValueError("start latencies must be >= 0")
    columns = arrivals if isinstance(arrivals, Arrivals) else Arrivals.of(arrivals)
    if not (all(execution >= 0 for execution in columns.execution_s) and math.isfinite(math.fsum(columns.at_s))):
        raise ValueError("arrivals need a finite time and an execution time >= 0")
    replay = _Replay(environment, columns, start_latencies_s, settings or ManagerSettings(), seed)
    replay.run(until_s)
    served = replay.served()
    (classes, totals), (whole_classes, whole_totals) = summarise(environment, replay.order, served, replay.timeline, until_s, interval_s)
    return Replay(served, classes, totals, replay.decisions, replay.started, replay.retired, whole_classes, whole_totals)
