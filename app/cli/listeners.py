"""One listening socket per uvicorn worker, so the kernel spreads connections evenly over the workers.

uvicorn's supervisor binds one socket and every worker accepts from it: the worker that wakes first accepts every
connection waiting, so a burst of new keep-alive connections lands on one worker, which then serves all their
requests while the others idle (bench/lifecycle.py measured one worker at a full core and the other at a tenth,
docs/benchmarks.md). On Linux each worker here listens on a socket of its own in one SO_REUSEPORT group instead,
and the kernel hands each new connection to one of them by a hash of its addresses, as nginx's `reuseport` does.
"""

from __future__ import annotations

import socket
import sys
from typing import Any


def balances_tcp_connections() -> bool:
    """Only Linux spreads TCP connections over a SO_REUSEPORT group; elsewhere one socket takes them all."""
    return sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


class ReusePortListener(socket.socket):
    """The supervisor's hold on the address: bound (so a port in use fails at once, and port 0 becomes the port
    every worker binds) but never listening, so the kernel gives it no connection. Sent to a worker process
    (uvicorn's supervisor pickles the sockets it gives each worker), it arrives there as a new socket of the
    same SO_REUSEPORT group, which the worker listens on."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        _join_group(self)
        self.bind((host, port))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return worker_socket, (self.family, self.getsockname())


def worker_socket(family: socket.AddressFamily, address: tuple[Any, ...]) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    _join_group(sock)
    sock.bind(address)
    return sock


def _join_group(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
