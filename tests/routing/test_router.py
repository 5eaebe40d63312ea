"""Routing through the running service: weights, a stopped link, the local instance, operators' changes, explain."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import httpx
import yaml
from fastapi import FastAPI

from tests.conftest import EXAMPLE_POLICY, install_policy, make_key
from tests.work.conftest import QM, World

NODES = ("EAST", "WEST", "NORTH")
EXAMPLE_POLICY_JSON = json.dumps(yaml.safe_load(EXAMPLE_POLICY))


def multi_node_policy(weights: tuple[int, ...] = (50, 50, 50), **instances: Any) -> str:
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["nodes"] = [{"name": node, "weight": weight} for node, weight in zip(NODES, weights, strict=True)]
    document["application_environments"][0]["instances"] = instances
    return json.dumps(document)


async def world_on(client: httpx.AsyncClient, document: str, qm_node: str | None = None) -> World:
    await install_policy(client, document, "application/json")
    qm = await make_key(client, "qm", ["queue_manager"])
    server_key = await make_key(client, "srv", ["server"], ["CB.*.PAYROLL.*"])
    response = await client.post("/v1/connections", headers=qm, json={**QM, **({"node": qm_node} if qm_node else {})})
    assert response.status_code == 201, response.text
    return World(client, qm, response.json()["token"], server_key)


async def server_on(world: World, node: str) -> str:
    body = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BANK1", "application_environment": "PAYROLL", "node": node}
    response = await world.client.post("/v1/connections", headers=world.server_key, json=body)
    assert response.status_code == 201, response.text
    return response.json()["token"]  # type: ignore[no-any-return]


async def operator(client: httpx.AsyncClient) -> dict[str, str]:
    return await make_key(client, "op", ["operator", "viewer"])


def metric(text: str, ae: str, node: str, how: str) -> float:
    """A routing counter's value in a Prometheus exposition (0 before its first count)."""
    series = f'wlm_routed_requests_total{{application_environment="{ae}",how="{how}",node="{node}"}} '
    return next((float(line[len(series) :]) for line in text.splitlines() if line.startswith(series)), 0.0)


async def routed(world: World, count: int) -> Counter[str]:
    return Counter([(await world.insert())["node"] for _ in range(count)])


async def test_weights_20_30_50_over_10000_requests_and_the_metrics(client: httpx.AsyncClient, app: FastAPI) -> None:
    world = await world_on(client, multi_node_policy((20, 30, 50)))
    counted = (await client.get("/metrics")).text
    before = {"NORTH": metric(counted, "PAYROLL", "NORTH", "algorithm"), "EAST-named": metric(counted, "PAYROLL", "EAST", "named")}
    # Through HTTP: 100 requests share exactly by weight.
    assert await routed(world, 100) == {"EAST": 20, "WEST": 30, "NORTH": 50}
    # The next 10,000 through the service's router, on the same state.
    state = app.state.wlm
    policy = await state.policies.current()
    shares = Counter([await state.router.route(policy, "PAYROLL", None) for _ in range(10_000)])
    for node, weight in zip(NODES, (20, 30, 50), strict=True):
        assert abs(shares[node] / 100 - weight) <= 1, shares
    # The counters count what was queued through the API (the 10,000 above went through the router only).
    await world.insert(node="EAST")
    metrics = (await client.get("/metrics")).text
    assert metric(metrics, "PAYROLL", "NORTH", "algorithm") - before["NORTH"] == 50
    assert metric(metrics, "PAYROLL", "EAST", "named") - before["EAST-named"] == 1


async def test_equal_weights_are_a_round_robin_and_a_named_node_is_kept(client: httpx.AsyncClient) -> None:
    world = await world_on(client, multi_node_policy())
    nodes = [(await world.insert())["node"] for _ in range(9)]
    assert nodes == list(NODES) * 3
    assert (await world.insert(node="WEST"))["node"] == "WEST"


async def test_a_stopped_link_receives_nothing_until_started_and_nothing_is_lost(client: httpx.AsyncClient) -> None:
    world = await world_on(client, multi_node_policy(), qm_node=None)
    servers = {node: await server_on(world, node) for node in NODES}
    op = await operator(client)
    stopped = await client.patch("/v1/routing/nodes/WEST", headers=op, json={"link_stopped": True})
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["link"] == "stopped"
    tokens = {}
    during: Counter[str] = Counter()
    for _ in range(30):
        queued = await world.insert()
        tokens[queued["token"]] = queued["node"]
        during[queued["node"]] += 1
    assert during == {"EAST": 15, "NORTH": 15}
    started = await client.patch("/v1/routing/nodes/WEST", headers=op, json={"link_stopped": None})
    assert started.json()["link"] == "running"
    after: Counter[str] = Counter()
    for _ in range(30):
        queued = await world.insert()
        tokens[queued["token"]] = queued["node"]
        after[queued["node"]] += 1
    assert after == {"EAST": 10, "WEST": 10, "NORTH": 10}
    # Every request accepted comes out once, on the node it was routed to.
    selected = []
    for node, server in servers.items():
        while (response := await world.select(server, expect=None, wait_seconds=0, begin=True)).status_code == 200:
            for work in response.json()["items"]:
                assert tokens[work["token"]] == node
                selected.append(work["token"])
                await world.end(server, work["token"])
    assert sorted(selected) == sorted(tokens)


async def test_a_queue_managers_own_node_keeps_its_requests_under_use_queue_local(client: httpx.AsyncClient) -> None:
    world = await world_on(client, multi_node_policy(), qm_node="WEST")
    assert await routed(world, 6) == {"WEST": 6}
    op = await operator(client)
    assert (await client.patch("/v1/routing/nodes/WEST", headers=op, json={"use_queue": "ANY"})).status_code == 200
    assert await routed(world, 6) == {"EAST": 2, "WEST": 2, "NORTH": 2}
    # The instance's own setting wins over its node's.
    altered = await client.patch("/v1/routing/application-environments/PAYROLL/instances/WEST", headers=op, json={"use_queue": "LOCAL"})
    assert altered.status_code == 200 and altered.json()["overridden"] == {"use_queue": "LOCAL"}
    assert await routed(world, 3) == {"WEST": 3}


async def test_explain_shows_each_elimination_and_changes_nothing(client: httpx.AsyncClient) -> None:
    world = await world_on(client, multi_node_policy(EAST={"put_enabled": False}, NORTH={"rank": 3}))
    viewer = await make_key(client, "viewer", ["viewer"])
    explained = await client.get("/v1/routing:explain", headers=viewer, params={"application_environment": "PAYROLL"})
    assert explained.status_code == 200, explained.text
    body = explained.json()
    assert body["chosen"] == "NORTH"
    steps = {step["step"]: step["eliminated"] for step in body["steps"]}
    assert steps["1.1"] == [{"node": "EAST", "link": None, "reason": "put disabled"}]
    assert steps["6"] == [{"node": "WEST", "link": None, "reason": "instance CLWLRANK 0 < 3"}]
    assert [c["node"] for c in body["candidates"]] == list(NODES)
    again = await client.get("/v1/routing:explain", headers=viewer, params={"application_environment": "PAYROLL"})
    assert again.json()["candidates"] == body["candidates"]
    assert (await world.insert())["node"] == "NORTH"


async def test_no_put_enabled_instance_is_a_conflict_and_suspended_nodes_come_last(client: httpx.AsyncClient) -> None:
    world = await world_on(client, multi_node_policy())
    op = await operator(client)
    for node in ("EAST", "NORTH"):
        response = await client.patch("/v1/routing/nodes/" + node, headers=op, json={"suspended": True})
        assert response.status_code == 200 and response.json()["suspended"] is True
    assert await routed(world, 4) == {"WEST": 4}
    for node in NODES:
        await client.patch(f"/v1/routing/application-environments/PAYROLL/instances/{node}", headers=op, json={"put_enabled": False})
    refused = await world.insert(expect=409)
    assert refused["error"]["code"] == "put_inhibited"
    listed = (await client.get("/v1/routing/nodes", headers=op)).json()["items"]
    assert [(n["node"], n["suspended"]) for n in listed] == [("EAST", True), ("WEST", False), ("NORTH", True)]


async def test_an_environment_on_one_node_follows_its_put_enabled_as_it_changes(client: httpx.AsyncClient) -> None:
    """The router works out a one-node environment's choice once (Router's sole decisions): an operator's change
    still takes effect at the next insert, both ways."""
    world = await world_on(client, EXAMPLE_POLICY_JSON)
    op = await operator(client)
    assert (await world.insert())["node"] == "LOCAL"
    instance = "/v1/routing/application-environments/PAYROLL/instances/LOCAL"
    assert (await client.patch(instance, headers=op, json={"put_enabled": False})).status_code == 200
    assert (await world.insert(expect=409))["error"]["code"] == "put_inhibited"
    assert (await client.patch(instance, headers=op, json={"put_enabled": True})).status_code == 200
    assert (await world.insert())["node"] == "LOCAL"


async def test_bad_routing_input_is_a_clear_4xx(client: httpx.AsyncClient) -> None:
    await world_on(client, multi_node_policy())
    op = await operator(client)
    out_of_range = await client.patch("/v1/routing/nodes/EAST", headers=op, json={"weight": 0})
    assert out_of_range.status_code == 422
    unknown = await client.patch("/v1/routing/nodes/SOUTH", headers=op, json={"weight": 5})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_node"
    empty = await client.patch("/v1/routing/nodes/EAST", headers=op, json={})
    assert empty.status_code == 422
    viewer = await make_key(client, "viewer", ["viewer"])
    assert (await client.patch("/v1/routing/nodes/EAST", headers=viewer, json={"weight": 5})).status_code == 403
    bad_policy = yaml.safe_load(multi_node_policy(SOUTH={"rank": 1}))
    response = await client.put("/v1/policy", headers=await make_key(client, "adm", ["admin"]), json=bad_policy)
    assert response.status_code == 422
    assert any("instances.SOUTH" in e["path"] for e in response.json()["error"]["errors"])


def linked_policy() -> str:
    """EAST reached by two links (NETPRTY 2 and 7), WEST by its one with NETPRTY 0, NORTH by its one with NETPRTY 9."""
    document = json.loads(multi_node_policy())
    document["nodes"][0]["links"] = [{"name": "E1", "network_priority": 2}, {"name": "E2", "network_priority": 7}]
    document["nodes"][2]["network_priority"] = 9
    return json.dumps(document)


async def explained_steps(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    body = (await client.get("/v1/routing:explain", headers=headers, params={"application_environment": "PAYROLL"})).json()
    return body, {step["step"]: step["eliminated"] for step in body["steps"]}


async def test_network_priority_picks_among_a_nodes_links_and_starves_no_node(client: httpx.AsyncClient) -> None:
    world = await world_on(client, linked_policy())
    # NETPRTY 0 beside 9 on other nodes: every node gets its share.
    assert await routed(world, 6) == {"EAST": 2, "WEST": 2, "NORTH": 2}
    op = await operator(client)
    body, steps = await explained_steps(client, op)
    assert steps["13"] == [{"node": "EAST", "link": "E1", "reason": "link NETPRTY 2 < 7"}]
    assert (body["chosen"], body["link"]) == ("EAST", "E2")
    assert steps["17"][0] == {"node": "WEST", "link": None, "reason": "equal sequence factor 40, used more recently (number 5 > 4)"}
    listed = {n["node"]: n["links"] for n in (await client.get("/v1/routing/nodes", headers=op)).json()["items"]}
    assert listed == {
        "EAST": [{"name": "E1", "network_priority": 2, "state": "inactive"}, {"name": "E2", "network_priority": 7, "state": "inactive"}],
        "WEST": [{"name": "WEST", "network_priority": 0, "state": "inactive"}],
        "NORTH": [{"name": "NORTH", "network_priority": 9, "state": "inactive"}],
    }


async def test_a_link_is_altered_stopped_and_started_on_its_own(client: httpx.AsyncClient) -> None:
    world = await world_on(client, linked_policy())
    op = await operator(client)
    stopped = await client.patch("/v1/routing/nodes/EAST/links/E2", headers=op, json={"stopped": True})
    assert stopped.status_code == 200, stopped.text
    assert [(link["name"], link["state"]) for link in stopped.json()["links"]] == [("E1", "inactive"), ("E2", "stopped")]
    assert stopped.json()["link"] == "inactive" and stopped.json()["overridden"] == {"links": {"E2": {"stopped": True}}}
    _, steps = await explained_steps(client, op)
    assert steps["8-11"] == [{"node": "EAST", "link": "E2", "reason": "link stopped"}]
    assert steps["13"] == []
    # EAST is still reached, over E1.
    assert await routed(world, 3) == {"EAST": 1, "WEST": 1, "NORTH": 1}
    raised = await client.patch("/v1/routing/nodes/EAST/links/E1", headers=op, json={"network_priority": 9})
    started = await client.patch("/v1/routing/nodes/EAST/links/E2", headers=op, json={"stopped": None})
    assert raised.status_code == started.status_code == 200
    assert started.json()["overridden"] == {"links": {"E1": {"network_priority": 9}}}
    _, steps = await explained_steps(client, op)
    assert steps["13"] == [{"node": "EAST", "link": "E2", "reason": "link NETPRTY 7 < 9"}]
    # A node's one link is named as the node; the node's own NETPRTY is what its links without one have.
    west = await client.patch("/v1/routing/nodes/WEST/links/WEST", headers=op, json={"network_priority": 4})
    assert west.json()["links"] == [{"name": "WEST", "network_priority": 4, "state": "inactive"}]
    north = await client.patch("/v1/routing/nodes/NORTH", headers=op, json={"network_priority": 1})
    assert north.json()["links"] == [{"name": "NORTH", "network_priority": 1, "state": "inactive"}]
    # Stopping the node's links stops every one; the link's own changes stay.
    every = await client.patch("/v1/routing/nodes/EAST", headers=op, json={"link_stopped": True})
    assert [link["state"] for link in every.json()["links"]] == ["stopped", "stopped"] and every.json()["link"] == "stopped"
    back = await client.patch("/v1/routing/nodes/EAST/links/E1", headers=op, json={"network_priority": None})
    assert back.json()["overridden"] == {"link_stopped": True}


async def test_bad_link_input_is_a_clear_4xx(client: httpx.AsyncClient) -> None:
    await world_on(client, linked_policy())
    op = await operator(client)
    unknown = await client.patch("/v1/routing/nodes/EAST/links/EAST", headers=op, json={"stopped": True})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_link"
    assert (await client.patch("/v1/routing/nodes/EAST/links/E1", headers=op, json={"network_priority": 10})).status_code == 422
    assert (await client.patch("/v1/routing/nodes/EAST/links/E1", headers=op, json={"weight": 5})).status_code == 422
    assert (await client.patch("/v1/routing/nodes/EAST/links/E1", headers=op, json={})).status_code == 422
    viewer = await make_key(client, "viewer", ["viewer"])
    assert (await client.patch("/v1/routing/nodes/EAST/links/E1", headers=viewer, json={"stopped": True})).status_code == 403
    admin = await make_key(client, "adm", ["admin"])
    for links, path in (([{"name": "E1"}, {"name": "e1"}], "nodes[0].links[1].name"), ([], "nodes[0].links")):
        document = json.loads(linked_policy())
        document["nodes"][0]["links"] = links
        response = await client.put("/v1/policy", headers=admin, json=document)
        assert response.status_code == 422, response.text
        assert [e["path"] for e in response.json()["error"]["errors"]] == [path]


async def test_a_node_whose_servers_died_is_retrying_and_comes_after_inactive_ones(client: httpx.AsyncClient, app: FastAPI) -> None:
    world = await world_on(client, multi_node_policy())
    state, op = app.state.wlm, await operator(client)
    await state.queues.environments.record_termination(state.queues.keys("EAST", "PAYROLL"), "99", 600_000)
    state.router.store.invalidate()
    links = {n["node"]: n["link"] for n in (await client.get("/v1/routing/nodes", headers=op)).json()["items"]}
    assert links == {"EAST": "retrying", "WEST": "inactive", "NORTH": "inactive"}
    assert await routed(world, 4) == {"WEST": 2, "NORTH": 2}
    await server_on(world, "EAST")
    state.router.store.invalidate()
    assert (await client.get("/v1/routing/nodes", headers=op)).json()["items"][0]["link"] == "running"
    # EAST joined the best group: the factors start again, and it is used.
    assert await routed(world, 3) == {"EAST": 1, "WEST": 1, "NORTH": 1}


async def test_concurrent_inserts_take_turns(client: httpx.AsyncClient) -> None:
    world = await world_on(client, multi_node_policy())
    queued = await asyncio.gather(*(world.insert() for _ in range(30)))
    assert Counter(q["node"] for q in queued) == {"EAST": 10, "WEST": 10, "NORTH": 10}


async def test_a_retry_with_an_idempotency_key_goes_where_the_first_try_went(client: httpx.AsyncClient) -> None:
    world = await world_on(client, multi_node_policy())
    first = await world.insert(idempotency_key="order-1")
    for _ in range(3):
        assert (await world.insert(idempotency_key="order-1"))["token"] == first["token"]
    # Other requests kept turning meanwhile: only the retries were pinned.
    assert await routed(world, 3) == {"EAST": 1, "WEST": 1, "NORTH": 1}


async def test_a_changed_weight_resets_the_sequence(client: httpx.AsyncClient) -> None:
    world = await world_on(client, multi_node_policy())
    await routed(world, 5)
    op = await operator(client)
    params = {"application_environment": "PAYROLL"}
    factors = [c["sequence_factor"] for c in (await client.get("/v1/routing:explain", headers=op, params=params)).json()["candidates"]]
    assert factors == [40.0, 40.0, 20.0]
    assert (await client.patch("/v1/routing/nodes/NORTH", headers=op, json={"weight": 10})).status_code == 200
    candidates = (await client.get("/v1/routing:explain", headers=op, params=params)).json()["candidates"]
    assert [(c["sequence_factor"], c["weight"]) for c in candidates] == [(0.0, 50), (0.0, 50), (0.0, 10)]


async def test_routing_before_any_policy_is_a_404(client: httpx.AsyncClient) -> None:
    op = await operator(client)
    response = await client.get("/v1/routing/nodes", headers=op)
    assert response.status_code == 404 and response.json()["error"]["code"] == "no_policy"
    assert (await client.patch("/v1/routing/nodes/EAST", headers=op, json={"weight": 5})).status_code == 404
