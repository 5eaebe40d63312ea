"""Each uvicorn worker listens on a socket of its own in one SO_REUSEPORT group, so connections spread over them."""

from __future__ import annotations

import os
import pickle
import socket
from pathlib import Path

import httpx
import pytest

from app.cli.listeners import ReusePortListener, balances_tcp_connections
from tests.processes import ServiceProcess
from tests.waiting import eventually_sync

pytestmark = pytest.mark.skipif(not balances_tcp_connections(), reason="SO_REUSEPORT spreads connections on Linux only")


def _accept_all(listener: socket.socket) -> list[socket.socket]:
    accepted = []
    while True:
        try:
            accepted.append(listener.accept()[0])
        except BlockingIOError:
            return accepted


def test_a_listener_sent_to_each_worker_arrives_as_its_own_socket_and_they_share_the_connections():
    with ReusePortListener("127.0.0.1", 0) as held:
        port = held.getsockname()[1]
        workers = [pickle.loads(pickle.dumps(held)) for _ in range(2)]  # as uvicorn's supervisor sends it
        clients: list[socket.socket] = []
        accepted: list[list[socket.socket]] = [[], []]
        try:
            for worker in workers:
                assert worker.fileno() != held.fileno() and worker.getsockname() == ("127.0.0.1", port)
                worker.listen()
                worker.setblocking(False)
            for _ in range(64):
                clients.append(socket.create_connection(("127.0.0.1", port)))

            def every_connection_accepted() -> bool:
                for mine, worker in zip(accepted, workers, strict=True):
                    mine.extend(_accept_all(worker))
                return sum(map(len, accepted)) == len(clients)

            # The supervisor's own socket never listens, so the workers accept every connection between them.
            eventually_sync(every_connection_accepted, 10, what="both workers' listeners to accept the 64 connections")
            assert all(accepted), [len(mine) for mine in accepted]  # by hash: all 64 on one would be 1 in 2**63
        finally:
            for sock in [*clients, *workers, *(s for mine in accepted for s in mine)]:
                sock.close()


def test_an_address_in_use_fails_at_once():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            ReusePortListener("127.0.0.1", taken.getsockname()[1])


ESTABLISHED, LISTENING = "01", "0A"


def _holders(port: int, state: str) -> list[int]:
    """The pid holding each socket on the local `port` in `state` (from /proc/net/tcp), once per socket."""
    inodes = set()
    with open("/proc/net/tcp") as rows:
        next(rows)
        for row in rows:
            fields = row.split()
            if fields[3] == state and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    holders = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                holders.extend(int(entry.name) for fd in (entry / "fd").iterdir() if os.readlink(fd) in inodes)
            except OSError:  # a process that ended meanwhile
                continue
    return holders


def test_two_workers_each_serve_some_of_the_connections(tmp_path):
    service = ServiceProcess(tmp_path, workers="2")
    service.start()
    try:
        eventually_sync(lambda: len(set(_holders(service.port, LISTENING))) == 2, 60, what="both workers listening")
        clients = [httpx.Client(base_url=service.url) for _ in range(32)]
        try:
            for client in clients:
                assert client.get("/healthz").status_code == 200  # each keeps its connection open
            holders = _holders(service.port, ESTABLISHED)
            assert len(holders) == 32 and set(holders) == set(_holders(service.port, LISTENING)), holders
        finally:
            for client in clients:
                client.close()
    finally:
        service.stop()
