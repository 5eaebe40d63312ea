"""An application environment's instance on a node, altered by an operator over HTTP
(PATCH /v1/routing/application-environments/{ae}/instances/{node}), on the real app, Redis and databases."""

from __future__ import annotations

import pytest

from tests.conftest import ADMIN, install_policy, make_key

pytestmark = pytest.mark.asyncio

INSTANCE = "/v1/routing/application-environments/PAYROLL/instances/LOCAL"


async def test_an_operator_alters_an_instance_and_a_null_takes_an_attribute_back(client):
    await install_policy(client)
    operator = await make_key(client, "console", ["operator"])
    altered = await client.patch(INSTANCE, headers=operator, json={"rank": 3, "put_enabled": False})
    assert altered.status_code == 200, altered.text
    assert altered.json() == {"node": "LOCAL", "application_environment": "PAYROLL", "overridden": {"rank": 3, "put_enabled": False}}
    back = await client.patch(INSTANCE, headers=operator, json={"put_enabled": None})
    assert back.status_code == 200 and back.json()["overridden"] == {"rank": 3}
    # Routing sees the change: the instance's rank is the operator's, its put enabled the policy's again.
    explained = await client.get("/v1/routing:explain", headers=operator, params={"application_environment": "PAYROLL"})
    [candidate] = explained.json()["candidates"]
    assert (candidate["node"], candidate["rank"], candidate["put_enabled"]) == ("LOCAL", 3, True)
    audited = (await client.get("/v1/audit", headers=ADMIN, params={"action": "routing.alter"})).json()["items"]
    assert [(event["actor"], event["target"], event["detail"]["changes"]) for event in audited] == [
        ("console", "LOCAL/PAYROLL", {"put_enabled": None}),
        ("console", "LOCAL/PAYROLL", {"rank": 3, "put_enabled": False}),
    ]


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/v1/routing/application-environments/NOPE/instances/LOCAL", {"rank": 1}, 404, "unknown_instance"),
        ("/v1/routing/application-environments/PAYROLL/instances/SOUTH", {"rank": 1}, 404, "unknown_node"),
        (INSTANCE, {}, 422, "validation_failed"),
        (INSTANCE, {"use_queue": "SOMEWHERE"}, 422, "validation_failed"),
        (INSTANCE, {"weight": 5}, 422, "validation_failed"),  # a node's attribute, not an instance's
    ],
)
async def test_a_change_of_no_instance_or_of_nothing_it_has_is_refused(client, path, body, status, code):
    await install_policy(client)
    refused = await client.patch(path, headers=ADMIN, json=body)
    assert refused.status_code == status and refused.json()["error"]["code"] == code, refused.text
    assert (await client.get("/v1/audit", headers=ADMIN, params={"action": "routing.alter"})).json()["items"] == []
