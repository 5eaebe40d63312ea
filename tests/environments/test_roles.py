"""Who may call each operation of the application environment's API: viewers look, operators change, a queue
manager defines its dynamic environments (a server setting its own environment's limits with its connect token is
test_server_limits.py's)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import install_policy, make_key

pytestmark = pytest.mark.asyncio

LIMITS = "/v1/application-environments/PAYROLL/server-limits"
INSTANCE = "/v1/routing/application-environments/PAYROLL/instances/LOCAL"

# method, path, body, the role it needs, a role that is refused (admin implies operator and viewer, not queue manager)
OPERATIONS: list[tuple[str, str, Any, str, str]] = [
    ("GET", "/v1/application-environments", None, "viewer", "queue_manager"),
    ("GET", "/v1/application-environments/PAYROLL", None, "viewer", "server"),
    ("GET", LIMITS, None, "viewer", "queue_manager"),
    ("PUT", LIMITS, {"min": 0, "max": 2}, "operator", "viewer"),  # without a connect token: an operator's
    ("DELETE", LIMITS, None, "operator", "viewer"),
    ("PATCH", INSTANCE, {"rank": 2}, "operator", "viewer"),
    ("POST", "/v1/application-environments", {"connect_token": "none", "name": "DYN1"}, "queue_manager", "admin"),
]


@pytest.mark.parametrize(("method", "path", "body", "needed", "refused"), OPERATIONS)
async def test_each_operation_needs_its_role(client, method, path, body, needed, refused):
    await install_policy(client)
    assert (await client.request(method, path, json=body)).status_code == 401
    outsider = await client.request(method, path, json=body, headers=await make_key(client, "outsider", [refused]))
    assert outsider.status_code == 403, outsider.text
    assert outsider.json()["error"]["code"] == "missing_role" and outsider.json()["error"]["required_roles"] == [needed]
    answer = await client.request(method, path, json=body, headers=await make_key(client, "insider", [needed]))
    if needed == "queue_manager":  # let through, then told that its connect token is no connection's
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_connection", answer.text
    else:
        assert answer.status_code == 200, answer.text
