"""What kind of Redis the service was pointed at, and the client that fits it.

WLM_REDIS_URL names a standalone Redis server or any node of a Redis Cluster: the service asks the server (INFO
cluster) and builds a cluster client for a cluster, which finds every node and sends each command to the node of
its keys' slot. Every script's keys share one hash tag (app/queues/keys.py), so every script runs on one node.

Pub/sub stays classic on a cluster: a PUBLISH reaches the subscribers of every node (the cluster bus carries it),
so a subscription on one node hears everything. What a cluster changes there is PUBLISH's answer, which counts the
publishing node's subscribers only. Where that answer matters (a wake-up: is its process listening?), the process
subscribes on every primary (`primaries`), to a channel of each primary's own, and a script publishes to the one of
the primary of its slot (`slot_owner`), where it runs (app/redis/broadcast.py, OnEveryPrimary).
"""

from __future__ import annotations

import logging
import random
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError, ResponseError, SlotNotCoveredError

from app.errors import UNAVAILABLE, closed_while_writing

log = logging.getLogger(__name__)


async def is_cluster(url: str) -> bool:
    """Whether `url` names a node of a Redis Cluster. A Redis that does not answer yet is taken for a standalone
    server, with a warning: its kind is asked again at the next start, and until then readiness says so if it
    turns out to be a cluster node (`cluster_enabled`)."""
    probe = Redis.from_url(url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5)
    try:
        return await cluster_enabled(probe)
    except UNAVAILABLE as exc:
        log.warning("Redis does not answer (%s): it is taken for a standalone server until the next start", exc)
        return False
    finally:
        await probe.aclose()


async def cluster_enabled(client: Redis) -> bool:
    """Whether the server `client` talks to is a Redis Cluster node (INFO cluster). One whose INFO is renamed or
    denied (some managed services) is taken for a standalone server: there is nothing to tell by."""
    try:
        info = await client.info("cluster")
    except ResponseError:
        return False
    return bool(int(info.get("cluster_enabled", 0)))


class ClusterClient(RedisCluster):
    """A Redis Cluster client whose pub/sub connections go to one primary, chosen when each subscribes: a
    subscription that lost its node subscribes again on another (see the module's note); or to each primary, through
    `primary_clients`. The primaries' clients it opens for that (and for `master_of`) live until `close_redis`:
    redis-py calls `aclose` itself to reset the cluster's topology (on CLUSTERDOWN, after MOVED), which must not end
    the subscriptions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._node_clients: dict[str, Redis] = {}

    def pubsub(self, **kwargs: Any) -> PubSub:  # type: ignore[override]  # one primary's PubSub, not a ClusterPubSub
        return self._client_of(random.choice(self.get_primaries())).pubsub(**kwargs)

    async def master_of(self, key: str) -> Redis:
        """A plain client of the master of `key`'s slot, for calls that must share one connection (WAIT after the
        write it waits for). A call on it that is redirected (MOVED) or loses its node tells `moved` or `lost`."""
        if self._initialize:
            await self.initialize()
        node = self.get_node_from_key(key)
        assert node is not None  # None is only for a replica asked of a slot that has none
        return self._client_of(node)

    async def moved(self, redirect: MovedError) -> None:
        """The slot cache learns where a redirected slot lives now, as redis-py's own calls teach it."""
        await self.nodes_manager.move_slot(redirect)

    def primary_clients(self) -> dict[str, Redis]:
        """A plain client of each primary the slot map knows now, by node name."""
        return {node.name: self._client_of(node) for node in self.get_primaries()}

    def owner_of(self, key: str) -> str | None:
        """The name of the primary of `key`'s slot as the slot map knows it now (no call to Redis); None while the
        slot is not covered."""
        try:
            node = self.nodes_manager.get_node_from_slot(self.keyslot(key))
        except (SlotNotCoveredError, KeyError):  # (KeyError: a slot the map has no entry for, in redis-py 8.1)
            return None
        return node.name

    def knows_topology(self) -> bool:
        """Whether the slot map is read and not known stale (redis-py reads it again at its next call otherwise)."""
        return not self._initialize

    def lost(self) -> None:
        """A node did not answer: the topology is read again before the next call, as after redis-py's own calls."""
        self._initialize = True

    def _client_of(self, node: ClusterNode) -> Redis:
        client = self._node_clients.get(node.name)
        if client is None:
            # The node's own connection settings: the URL's credentials, TLS and timeouts, for this node; as many
            # connections as the cluster client's own per node, waited for as `open_redis`'s are.
            pool = BlockingConnectionPool(
                connection_class=node.connection_class, max_connections=node.max_connections, timeout=10, **node.connection_kwargs
            )
            client = self._node_clients[node.name] = Redis.from_pool(pool)  # closing the client closes its pool
        return client

    async def _execute_command(self, target_node: ClusterNode, *args: Any, **kwargs: Any) -> Any:
        # A connection closed under a call as its node failed (closed_while_writing) answered a select 500 during a
        # master's failover: as the lost connection it is, marked as redis-py marks one, the call is retried on the
        # cluster's topology read again.
        try:
            return await super()._execute_command(target_node, *args, **kwargs)
        except (AttributeError, TypeError, RuntimeError) as exc:
            if not closed_while_writing(exc):
                raise
            self.lost()
            lost = RedisConnectionError(f"the connection to {target_node.name} was closed while a command was sent on it")
            lost.last_failed_node_name = target_node.name  # type: ignore[attr-defined]  # undeclared: redis-py sets it so too
            raise lost from exc

    async def close_node_clients(self) -> None:
        clients, self._node_clients = list(self._node_clients.values()), {}
        for client in clients:
            await client.aclose()


STANDALONE = ""  # the one server's name in `primaries` and `slot_owner`


def primaries(client: Redis) -> dict[str, Redis]:
    """A client of each primary by name: a cluster's primaries, or a standalone server's one (named STANDALONE)."""
    return client.primary_clients() if isinstance(client, ClusterClient) else {STANDALONE: client}


def slot_owner(client: Redis, key: str) -> str | None:
    """The name (as `primaries` gives it) of the primary that runs the scripts of `key`'s slot."""
    return client.owner_of(key) if isinstance(client, ClusterClient) else STANDALONE


async def close_redis(client: Redis) -> None:
    """Closes a client `open_redis` made, with what it opened of its own."""
    if isinstance(client, ClusterClient):
        await client.close_node_clients()
    await client.aclose()


async def open_redis(url: str, cluster: bool, *, max_connections: int, **options: Any) -> Redis:
    """A client of the Redis at `url` with replies decoded: a pool of at most `max_connections` (per node on a
    cluster) that callers wait on when it is exhausted (a cluster's refuses at once: 503, redis unavailable).
    Closed with `close_redis`."""
    options = {"decode_responses": True, "health_check_interval": 30, **options}
    if not cluster:
        return Redis(connection_pool=BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=10, **options))
    client = ClusterClient.from_url(url, max_connections=max_connections, **options)
    await client.initialize()  # the nodes known now: a subscription picks among them
    return client  # type: ignore[return-value]  # the service types its client Redis: a cluster's takes the same commands
