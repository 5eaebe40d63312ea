"""`wlm route` against a real `wlm serve`, as an operator at a terminal uses it."""

from __future__ import annotations

from pathlib import Path

from tests.processes import ServiceProcess
from tests.routing.test_router import linked_policy, multi_node_policy


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


def test_a_nodes_links_are_listed_stopped_altered_and_explained_one_by_one(service: ServiceProcess, tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(linked_policy())
    assert service.wlm("policy", "install", str(policy)).returncode == 0
    stopped = service.wlm("route", "stop", "EAST", "--link", "E2")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout == "EAST: links E1 inactive NETPRTY 2, E2 stopped NETPRTY 7; weight 50, rank 0, use-queue LOCAL\n"
    # Operators' changes outlast a policy install: only what this test changed is looked at.
    altered = service.wlm("route", "alter", "NORTH", "--link", "NORTH", "--network-priority", "3")
    assert altered.stdout.startswith("NORTH: link inactive, weight ") and ", NETPRTY 3, " in altered.stdout
    assert "EAST link E2 (link stopped)" in service.wlm("route", "explain", "PAYROLL").stdout
    assert service.wlm("route", "start", "EAST", "--link", "E2").stdout.startswith(
        "EAST: links E1 inactive NETPRTY 2, E2 inactive NETPRTY 7;"
    )
    assert "  step 13    EAST link E1 (link NETPRTY 2 < 7)" in service.wlm("route", "explain", "PAYROLL").stdout.splitlines()
    refused = service.wlm("route", "alter", "EAST", "--link", "E1", "--weight", "5")
    assert refused.returncode == 1 and "--network-priority (not --weight)" in refused.stderr
