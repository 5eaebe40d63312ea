"""The service on a real 3-master Redis Cluster the test starts (app/redis/topology.py): a URL naming any node is
all it takes; two replicas, each given another node, queue work over the three masters, wake each other's long
polls, elect one scheduler and write every record, with no traceback in the log."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest
import redis
from fastapi import FastAPI
from redis.crc import key_slot

from app.config import Settings
from app.queues.keys import AeKeys, notify_channel
from app.queues.store import QueueStore
from app.redis.broadcast import OnEveryPrimary
from app.redis.durability import NotDurable
from app.redis.topology import ClusterClient, close_redis, is_cluster, open_redis, slot_owner
from app.work import select as select_module
from tests.conftest import ADMIN_KEY, client_of, running_app
from tests.processes import ServiceProcess
from tests.queues.conftest import QUEUE_MANAGER, request
from tests.redis_cluster import SLOTS, LocalCluster, redis_cluster
from tests.routing.test_router import NODES, multi_node_policy, server_on, world_on
from tests.waiting import eventually
from tests.work.conftest import ONLINE, make_world


@pytest.fixture
def cluster_urls(shared_cluster: LocalCluster) -> list[str]:
    return shared_cluster.masters


def _master_of(key: str, masters: int = 3) -> int:
    """Which master holds `key`: the test's cluster gives each an equal run of slots, in order."""
    return min(key_slot(key.encode()) // (SLOTS // masters), masters - 1)


def _prefix_over_every_master(base: str) -> str:
    """A key prefix (`base` and a number) whose three nodes' queues fall on three different masters."""
    for n in range(1000):
        prefix = f"{base}{n}"
        if len({_master_of(AeKeys(prefix, node, "PAYROLL").tag) for node in NODES}) == 3:
            return prefix
    raise AssertionError("no prefix spreads the queues")


def test_the_cluster_is_real(cluster_urls: list[str]) -> None:
    """Three masters that each hold a third of the slots: a key of another node's slots is redirected."""
    assert len(cluster_urls) == 3
    nodes = [redis.Redis.from_url(url) for url in cluster_urls]
    try:
        moved = 0
        for node in nodes:
            try:
                node.set("{wlm:LOCAL:PAYROLL}:probe", 1)
            except redis.exceptions.MovedError:
                moved += 1
        assert moved == 2
    finally:
        for node in nodes:
            node.close()


async def test_a_cluster_is_told_from_one_server(cluster_urls: list[str], redis_url: str) -> None:
    assert [await is_cluster(url) for url in cluster_urls] == [True, True, True]
    assert await is_cluster(redis_url) is False


async def test_each_master_gets_a_pipelined_connection_and_a_stale_slot_map_is_corrected(
    cluster_urls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scripts go to their slot's master on its own pipelined connection, not redis-py's pool; a call sent to the
    wrong master (a slot map gone stale: a slot moved, a replica took over) is redirected, did not run there, and
    runs where the slot is, once."""
    client = await open_redis(cluster_urls[0], True, max_connections=20)
    assert isinstance(client, ClusterClient)
    store = QueueStore(client, _prefix_over_every_master("pipelined"), idempotency_ttl_s=60, tombstone_ms=1000, samples_ms=1000)
    try:
        places = [store.keys(node, "PAYROLL") for node in NODES]
        await client.initialize()
        for k in places:
            assert await store.insert(k, QUEUE_MANAGER, [request()], 10**6)
        masters = store.scripts._masters
        assert masters is not None
        opened = {name for name, pipeline in masters._pipelines.items() if pipeline is not None and pipeline._protocol is not None}
        assert len(opened) == 3  # one per master, each used

        wrong = client.get_node_from_key(places[1].tag)
        monkeypatch.setattr(client, "get_node_from_key", lambda key, replica=False: wrong)
        taught = []
        moved = client.moved

        async def spied(redirect: redis.exceptions.MovedError) -> None:
            taught.append(redirect)
            await moved(redirect)

        monkeypatch.setattr(client, "moved", spied)
        sent = request()
        assert await store.insert(places[0], QUEUE_MANAGER, [sent], 10**6) == [sent.id]
        assert len(taught) == 1  # redirected once, then sent redis-py's way
        assert await store.environments.queue_depths(places[0]) == {"ONLINE": 2}  # queued once, on its own master
    finally:
        await store.aclose()
        await close_redis(client)


async def test_subscriptions_outlive_the_cluster_client_s_own_resets(cluster_urls: list[str]) -> None:
    """redis-py closes a cluster client (`aclose`) to read the topology again, on CLUSTERDOWN and after MOVED: a
    subscription on one of its primaries hears on, until `close_redis`."""
    client = await open_redis(cluster_urls[0], True, max_connections=10)
    masters = [redis.Redis.from_url(url, decode_responses=True) for url in cluster_urls]

    def subscribers() -> set[str]:
        """This test's subscriptions: the cluster is the session's, and other tests' connections may linger."""
        every = {f"{url} {c['id']}" for url, node in zip(cluster_urls, masters, strict=True) for c in node.client_list(_type="pubsub")}
        return every - before

    before: set[str] = set()
    before = subscribers()
    try:
        async with client.pubsub() as pubsub:
            await pubsub.subscribe("wlmtest:channel")
            subscribed = subscribers()
            assert len(subscribed) == 1
            await client.aclose()  # as redis-py resets the topology
            assert subscribers() == subscribed  # the subscription's connection was not closed
            await client.publish("wlmtest:channel", "heard")  # the client opens again by itself

            async def heard() -> bool:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
                return message is not None and message["data"] == "heard"

            await eventually(heard, what="the message heard after the reset")
        await close_redis(client)
        await eventually(lambda: subscribers() == set(), what="the subscription's connection closed by disconnect")
    finally:
        await close_redis(client)
        for node in masters:
            node.close()


async def test_a_listener_on_every_primary_is_counted_wherever_a_message_is_published_and_hears_it_once(
    cluster_urls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster's PUBLISH counts the subscribers of the node it runs on: a listener subscribed on every primary is
    counted by each. The cluster bus brings it a copy through each primary; it keeps the one through the primary of
    the message's slot (as a script publishes a wake-up on its keys' primary)."""
    client = await open_redis(cluster_urls[0], True, max_connections=10)
    kept: list[str] = []
    copies: list[tuple[str, str]] = []
    listener = OnEveryPrimary(
        client,
        "test",
        lambda message: kept.append(message["channel"]),
        slot_key=lambda message: message["channel"],
        patterns=["{wlmtest-every:*}:ping"],
    )
    heard = listener._heard

    def every_copy(primary: str, message: dict[str, str]) -> None:
        copies.append((primary, message["channel"]))
        heard(primary, message)

    monkeypatch.setattr(listener, "_heard", every_copy)  # before start: each primary's subscription takes it
    masters = [redis.Redis.from_url(url, decode_responses=True) for url in cluster_urls]
    listener.start()
    try:
        await eventually(lambda: len(listener.listening()) == 3, what="the pattern confirmed on the three primaries")
        for index, master in enumerate(masters):
            channel = next(c for n in range(1000) if _master_of(c := f"{{wlmtest-every:{n}}}:ping") == index)
            owner = f"127.0.0.1:{master.connection_pool.connection_kwargs['port']}"
            assert slot_owner(client, channel) == owner
            assert [m.publish(channel, "x") for m in masters] == [1, 1, 1]  # counted wherever it was published

            def every_primary_heard(channel: str = channel) -> bool:
                return sorted(primary for primary, heard_on in copies if heard_on == channel) == sorted(listener.listening() * 3)

            await eventually(every_primary_heard, what="each publish heard through every primary")
            assert kept.count(channel) == 3  # once per publish
    finally:
        await listener.stop()
        await close_redis(client)
        for master in masters:
            master.close()


async def test_a_primary_s_own_channel_is_counted_there_alone_and_heard_once(cluster_urls: list[str]) -> None:
    """A channel of a primary's own is subscribed there alone: a PUBLISH on that primary counts the listener, one on
    another counts nobody, and each reaches the listener once (the bus brings it to the primary where it listens)."""
    client = await open_redis(cluster_urls[0], True, max_connections=10)
    kept: list[tuple[str, str]] = []
    listener = OnEveryPrimary(
        client,
        "test",
        lambda message: kept.append((message["channel"], message["data"])),
        slot_key=lambda message: message["channel"],
        own_channel=lambda primary: f"wlmtest-own:{primary}",
    )
    masters = [redis.Redis.from_url(url, decode_responses=True) for url in cluster_urls]
    listener.start()
    try:
        await eventually(lambda: len(listener.listening()) == 3, what="an own channel confirmed on each of the three primaries")
        channels = [f"wlmtest-own:127.0.0.1:{master.connection_pool.connection_kwargs['port']}" for master in masters]
        for channel, publisher in zip(channels, masters, strict=True):
            assert [m.publish(channel, "x") for m in masters] == [1 if m is publisher else 0 for m in masters]
        # A marker from every master after its messages: the bus keeps each link's order, so all are in once they are.
        markers = [(channel, f"marker {index}") for channel in channels for index in range(len(masters))]
        for channel, marker in markers:
            masters[int(marker.split()[1])].publish(channel, marker)
        await eventually(lambda: set(markers) <= set(kept), what="every master's marker heard on every channel")
        assert sorted(kept) == sorted([(channel, "x") for channel in channels] * 3 + markers)
    finally:
        await listener.stop()
        await close_redis(client)
        for master in masters:
            master.close()


@pytest.fixture
async def replicas(cluster_urls: list[str], settings: Settings) -> AsyncIterator[list[tuple[FastAPI, httpx.AsyncClient]]]:
    """Two replicas on the cluster, the first given the first node's URL, the second the second's."""
    prefix = _prefix_over_every_master(settings.redis_prefix)  # the test's own: the cluster outlives it
    async with AsyncExitStack() as stack:
        started = []
        for url in cluster_urls[:2]:
            replica = await stack.enter_async_context(running_app(settings.model_copy(update={"redis_url": url, "redis_prefix": prefix})))
            started.append((replica, await stack.enter_async_context(client_of(replica))))
        yield started


async def test_two_replicas_serve_the_whole_lifecycle_over_three_masters(
    replicas: list[tuple[FastAPI, httpx.AsyncClient]],
    cluster_urls: list[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(select_module, "POLL_FALLBACK_SECONDS", 60.0)  # a poll answered was woken through pub/sub
    (first_app, first), (second_app, second) = replicas
    assert isinstance(first_app.state.wlm.redis, ClusterClient)
    for client in (first, second):
        assert (await client.get("/readyz")).status_code == 200
    world = await world_on(first, multi_node_policy())
    # A long-polling server per node, each waiting in the second replica: the first replica's inserts wake them.
    servers = {node: await server_on(world, node) for node in NODES}
    polls = {
        node: asyncio.create_task(
            second.post("/v1/work/select", headers=world.server_key, json={"connect_token": token, "wait_seconds": 20, "begin": True})
        )
        for node, token in servers.items()
    }
    keys = [AeKeys(first_app.state.wlm.queues.prefix, node, "PAYROLL") for node in NODES]
    admin = first_app.state.wlm.redis

    async def all_waiting() -> bool:
        return all([await admin.zcard(k.waiters) == 1 for k in keys])

    await eventually(all_waiting, what="a listed waiter on every node")
    # Each insert's wake-up reaches the second replica through its own channel, heard where the script ran (its
    # primary): none looks unheard and goes to the environment's channel as well (app/work/long_poll.py).
    waiting = second_app.state.wlm.dispatcher
    await eventually(lambda: len(waiting._notifications.listening()) == 3, what="subscribed on every primary")
    notified: list[str] = []
    on_notify = waiting._notifications._on_message

    def watch_notify(message: dict[str, str]) -> None:
        notified.append(message["channel"])
        on_notify(message)

    monkeypatch.setattr(waiting._notifications, "_on_message", watch_notify)
    queued = {node: (await world.insert({"node": node}, node=node))["token"] for node in NODES}
    for node, poll in polls.items():
        answer = await asyncio.wait_for(poll, 10)
        assert answer.status_code == 200, answer.text
        [item] = answer.json()["items"]
        assert (item["token"], item["payload"]) == (queued[node], {"node": node})
        ended = await second.post(
            "/v1/work/select", headers=world.server_key, json={"connect_token": servers[node], "end": [{"token": item["token"]}]}
        )
        assert ended.status_code in (200, 204), ended.text
    # A marker published on each master, of an environment of that master (so kept through it): heard after
    # whatever that master published before it.
    markers = [
        next(
            notify_channel(waiting.prefix, "NOWHERE", str(n))
            for n in range(1000)
            if _master_of(AeKeys(waiting.prefix, "NOWHERE", str(n)).tag) == i
        )
        for i in range(3)
    ]
    for url, marker in zip(cluster_urls, markers, strict=True):
        with redis.Redis.from_url(url) as master:
            master.publish(marker, 0)
    await eventually(lambda: set(markers) <= set(notified), what="the markers heard")
    # Each wake-up once, through the process's channel on its environment's primary; none to every process.
    wake_channels = [waiting.wake_channel(slot_owner(admin, k.tag)) for k in keys]
    assert len(set(wake_channels)) == 3
    assert sorted(notified) == sorted(wake_channels + markers)

    # Each node's queue on its own master: every master holds keys of this service (the cluster is the session's).
    prefix = first_app.state.wlm.queues.prefix
    per_master = [redis.Redis.from_url(url) for url in cluster_urls]
    try:
        assert all(next(node.scan_iter(match=f"*{prefix}*", count=1000), None) is not None for node in per_master)
    finally:
        for node in per_master:
            node.close()

    # One scheduler between the two; every record written to the outbox's files (the outbox lists emptied).
    schedulers = [app.state.wlm.scheduler for app in (first_app, second_app)]
    await eventually(lambda: sum(member.active for member in schedulers) == 1, what="one scheduler elected")

    async def records_written() -> bool:
        return all([await admin.llen(k.records) == 0 for k in keys])

    await eventually(records_written, what="the records written")
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


async def test_strict_durability_checks_every_primary(cluster_urls: list[str], settings: Settings) -> None:
    """Strict mode (the tests' default) starts on the cluster, whose nodes fsync before they reply; with one node
    fsyncing every second, it names that node and does not start."""
    node = redis.Redis.from_url(cluster_urls[2])
    node.config_set("appendfsync", "everysec")
    try:
        with pytest.raises(NotDurable, match=f"the Redis Cluster node 127.0.0.1:{node.connection_pool.connection_kwargs['port']} runs"):
            async with running_app(settings.model_copy(update={"redis_url": cluster_urls[0]})):
                pass
    finally:
        node.config_set("appendfsync", "always")
        node.close()


async def test_a_standalone_redis_is_served(settings: Settings) -> None:
    async with running_app(settings) as app:
        assert app.state.wlm.queues is not None
        assert not isinstance(app.state.wlm.redis, ClusterClient)


async def test_a_killed_master_s_replica_takes_over_and_the_service_serves_on(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 masters with a replica each; the master holding the queue is killed (SIGKILL). Inserts answer 503 while no
    node serves its slots (never 500), the service finds the promoted replica by itself, readiness comes back, and
    every insert answered 201 before the kill is served: strict mode answered each once the replica had it (with
    the replica stopped, an insert is answered 503 not_durable). The long polls' wake-ups follow to the promoted
    replica."""
    caplog.set_level(logging.WARNING)
    with redis_cluster(tmp_path_factory.mktemp("failover"), replicas=1, node_timeout_ms=1000) as cluster:
        update = {"redis_url": cluster.masters[0], "replica_wait_ms": 1000}
        async with running_app(settings.model_copy(update=update)) as app, client_of(app) as client:
            world = await make_world(client)
            server = await world.server(tasks=100)
            k = AeKeys(settings.redis_prefix, "LOCAL", "PAYROLL")
            victim = cluster.masters[_master_of(k.tag)]
            replica = cluster.processes[int(cluster.replicas[_master_of(k.tag)].rsplit(":", 1)[1].split("/")[0])]
            replica.send_signal(signal.SIGSTOP)
            try:
                refused = await world.insert({"n": "unconfirmed"}, expect=503)
                assert refused["error"]["code"] == "not_durable"
            finally:
                replica.send_signal(signal.SIGCONT)
            queued = [(await world.insert_until_accepted({"n": n}, idempotency_key=str(n)))["token"] for n in range(20)]
            cluster.kill(victim)  # at once: each 201 above was answered once the replica had its insert (WAIT)

            answers: list[int] = []

            body = {
                "connect_token": world.qm_token,
                "application_environment": "PAYROLL",
                "classification": ONLINE,
                "payload": {"n": "after"},
            }

            async def inserts_again() -> bool:
                answers.append((await client.post("/v1/work", headers=world.qm, json=body)).status_code)
                return answers[-1] == 201

            await eventually(inserts_again, 30, what="an insert answered 201 after the failover", interval=0.2)
            assert set(answers) <= {201, 503}, answers
            await eventually(lambda: _ready(client), 10, what="ready again")
            selected = (await world.select(server, max_items=100)).json()["items"]
            assert set(queued) <= {item["token"] for item in selected}

            # The wake-ups' subscriptions follow the primaries: the promoted replica's, not the killed master's; a
            # long poll is woken by the insert, not by its once-a-second retry.
            dispatcher = app.state.wlm.dispatcher
            killed = victim.removeprefix("redis://").removesuffix("/0")

            def followed() -> bool:
                listening = dispatcher._notifications.listening()
                return len(listening) == 3 and killed not in dispatcher._notifications._subscriptions

            await eventually(followed, 30, what="subscribed on the three primaries after the failover")
            monkeypatch.setattr(select_module, "POLL_FALLBACK_SECONDS", 60.0)
            poll = asyncio.create_task(world.select(server, wait_seconds=20))

            async def listed() -> bool:
                return await app.state.wlm.redis.zcard(k.waiters) == 1

            await eventually(listed, what="the long poll listed")
            woken = await world.insert({"n": "woken"})
            answer = await asyncio.wait_for(poll, 10)
            assert [item["token"] for item in answer.json()["items"]] == [woken["token"]]
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


async def _ready(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 200


async def test_wlm_serve_on_a_cluster_serves_the_lifecycle_and_logs_no_traceback(cluster_urls: list[str], tmp_path: Path) -> None:
    """The README's way: `wlm serve` (two workers) with WLM_REDIS_URL naming one node of the cluster; a lifecycle
    over HTTP and the CLI against it; then SIGTERM, and a log without a traceback."""
    service = ServiceProcess(tmp_path, redis_url=cluster_urls[1], bootstrap_admin_key=ADMIN_KEY, workers="2")
    service.start()
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=30) as http:
            world = await make_world(http)
            server = await world.server()
            poll = asyncio.create_task(world.select(server, wait_seconds=20, begin=True))
            queued = await world.insert({"n": 1})
            [item] = (await asyncio.wait_for(poll, 25)).json()["items"]
            assert item["token"] == queued["token"]
            await world.end(server, item["token"])
        assert "PAYROLL" in service.wlm("policy", "show", "--key", ADMIN_KEY).stdout
        assert service.stop() == 0
    finally:
        service.kill()
    log = service.log_path.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log


async def test_a_cluster_node_taken_for_a_single_server_is_not_ready(cluster_urls: list[str]) -> None:
    """A cluster that did not answer at start is run with a single server's client until the next start: readiness
    says so, rather than passing while most keys answer MOVED."""
    single = await open_redis(cluster_urls[0], False, max_connections=4)
    store = QueueStore(single, "wlmtest", idempotency_ttl_s=60, tombstone_ms=1000, samples_ms=1000)
    try:
        with pytest.raises(RuntimeError, match="names a Redis Cluster node"):
            await store.ping()
    finally:
        await store.aclose()
        await close_redis(single)
