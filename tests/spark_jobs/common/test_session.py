"""The accumulator server's quick stop (spark_jobs/common/session.py), on PySpark's own server, and what a JVM that
did not start said: no JVM needed."""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

import pytest
from pyspark.accumulators import _start_update_server

from spark_jobs.common.job_log import JobLog
from spark_jobs.common.session import _last_words, stop_accumulator_server


def _serving() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if "serve_forever" in repr(getattr(thread, "_target", None))}


@pytest.mark.parametrize("unix_socket", [False, True], ids=["tcp", "unix socket"])
@pytest.mark.parametrize("jvm_connected", [False, True], ids=["idle", "a connection open"])
def test_the_accumulator_server_stops_whole_and_quietly(unix_socket: bool, jvm_connected: bool, tmp_path, capfd) -> None:
    """Stopped, its thread ended, its socket closed, and the connections that woke it raised nothing in its handler
    (a handler still waiting for a token fails on a closed connection). With a connection open, as the JVM keeps one
    once a job's Python tasks have run, its handler serves that connection until it sees the shutdown."""
    before = _serving()
    server = _start_update_server("token", unix_socket, str(tmp_path / "accumulators.sock"))
    address, family = server.server_address, server.address_family
    held = socket.socket(family)
    if jvm_connected:
        held.connect(address)
        # The JVM's first words: the token (none on a Unix socket), then an update of nothing.
        held.sendall((server.auth_token or "").encode() + struct.pack("!i", 0))
        assert held.recv(1) == b"\x01"  # acknowledged: the handler now serves this connection

    stop_accumulator_server(server)

    for thread in _serving() - before:
        thread.join(10)
        assert not thread.is_alive()
    with pytest.raises(OSError), socket.socket(family) as late:
        late.connect(address)
    held.close()
    assert "Traceback" not in capfd.readouterr().err


def test_a_jvm_that_did_not_start_is_quoted_without_the_job_s_lines_written_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "report.log"
    with JobLog("workload-activity", path) as log:
        log.detail("before the start")
        start = path.stat().st_size
        log.file.write("Error occurred during initialization of VM\n")
        log.detail("1 policy versions")  # the job reads what needs no Spark while the JVM starts
        log.file.write("Too small maximum heap\n\tat a frame\n")
        log.detail("5 files hold only records that other files hold: not read")
    assert _last_words(path, start) == ["Error occurred during initialization of VM", "Too small maximum heap"]
