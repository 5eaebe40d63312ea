from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

import pytest
from pyspark.accumulators import _start_update_server

from spark_jobs.common.session import stop_accumulator_server


def _serving_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if "serve_forever" in repr(getattr(thread, "_target", None))]


@pytest.mark.parametrize("unix_socket", [False, True], ids=["tcp", "unix socket"])
def test_the_accumulator_server_stops_whole_and_quietly(unix_socket: bool, tmp_path, capfd: pytest.CaptureFixture[str]) -> None:
    """PySpark's own server (no JVM needed): stopped, its thread ended, its socket closed, and the connections that
    woke it raised nothing in its handler (a handler still waiting for a token fails on a closed connection)."""
    before = set(_serving_threads())
    server = _start_update_server("token", unix_socket, str(tmp_path / "accumulators.sock"))
    context = SimpleNamespace(_accumulatorServer=server)
    address, family = server.server_address, server.address_family

    stop_accumulator_server(context)  # type: ignore[arg-type]

    assert context._accumulatorServer is None
    assert set(_serving_threads()) <= before
    with pytest.raises(OSError), socket.socket(family) as late:
        late.connect(address)
    assert "Traceback" not in capfd.readouterr().err


def test_a_context_without_a_server_is_left_alone() -> None:
    context = SimpleNamespace(_accumulatorServer=None)
    stop_accumulator_server(context)  # type: ignore[arg-type]
    assert context._accumulatorServer is None
