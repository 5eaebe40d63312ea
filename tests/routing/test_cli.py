"""`wlm route` against a real `wlm serve`, as an operator at a terminal uses it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import ServiceProcess
from tests.routing.test_router import multi_node_policy


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    process = ServiceProcess(tmp_path_factory.mktemp("route-cli"))
    process.start()
    yield process
    process.stop()



def test_stop_alter_list_and_explain(service: ServiceProcess, tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(multi_node_policy(EAST={"put_enabled": False}))
    assert service.wlm("policy", "install", str(policy)).returncode == 0
    stopped = service.wlm("route", "stop", "WEST")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout == "WEST: link stopped, weight 50, NETPRTY 0, rank 0, use-queue LOCAL\n"
    assert service.wlm("route", "alter", "NORTH", "--weight", "20").returncode == 0
    listed = service.wlm("route", "nodes").stdout.splitlines()
    assert listed[2] == "NORTH: link inactive, weight 20, NETPRTY 0, rank 0, use-queue LOCAL"
    explained = service.wlm("route", "explain", "PAYROLL")
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[0] == "PAYROLL from no node: NORTH chosen"
    assert "  step 1.1   EAST (put disabled)" in lines
    assert "  step 8-11  WEST (link stopped)" in lines
    refused = service.wlm("route", "alter", "NORTH")
    assert refused.returncode == 1 and "name what to alter" in refused.stderr
    bad = service.wlm("route", "alter", "NORTH", "--weight", "100")
    assert bad.returncode == 1 and "error 422" in bad.stderr and "weight" in bad.stderr
