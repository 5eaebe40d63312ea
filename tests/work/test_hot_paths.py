"""Insert and select take the fast path (app.web.guards.HotPathsMiddleware); a query string sends the same request
through FastAPI's own plumbing. Both must answer every request alike, errors included."""

from __future__ import annotations

from typing import Any

import pytest

from app.web.http_metrics import HTTP_REQUESTS
from tests.work.conftest import World

FRAMEWORK = "?via=framework"  # an unknown query parameter: ignored by the route, but the fast path steps aside


def _comparable(body: Any) -> Any:
    return {k: v for k, v in body.items() if k != "token"} if isinstance(body, dict) else body


def _error_shape(result: tuple[int, Any]) -> tuple[int, str, list[str]]:
    error = result[1]["error"]
    return result[0], error["code"], [e["path"] for e in error.get("errors", [])]


async def _both(world: World, path: str, headers: dict[str, str], content: bytes) -> tuple[tuple[int, Any], tuple[int, Any]]:
    results = []
    for suffix in ("", FRAMEWORK):
        response = await world.client.post(path + suffix, headers={**headers, "content-type": "application/json"}, content=content)
        results.append((response.status_code, response.json() if response.content else None))
    return results[0], results[1]


async def test_broken_json_is_refused_on_both_paths(world: World) -> None:
    fast, framework = await _both(world, "/v1/work", world.qm, b'{"connect_token": ')
    assert fast[0] == framework[0] == 422
    assert fast[1]["error"]["code"] == framework[1]["error"]["code"] == "validation_failed"
    # The fast path says where (pydantic's own parser); FastAPI's says only that the JSON did not decode.
    assert "Invalid JSON" in fast[1]["error"]["errors"][0]["message"]


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"[]",
        b'{"connect_token": 5}',
        b'{"application_environment": "PAYROLL"}',
        b'{"connect_token": "c_nope", "application_environment": "PAYROLL", "classification": {"userid": "X"}}',
        b'{"connect_token": "c_nope", "application_environment": "PAYROLL", "surprise": 1}',
    ],
)
async def test_bad_inserts_get_the_same_answer_on_both_paths(world: World, content: bytes) -> None:
    fast, framework = await _both(world, "/v1/work", world.qm, content)
    assert 400 <= fast[0] < 500
    # Same status, code and paths; pydantic words a few messages differently when it validates JSON itself.
    assert _error_shape(fast) == _error_shape(framework)


async def test_a_good_insert_and_select_answer_alike_on_both_paths(world: World) -> None:
    server = await world.server(tasks=2)
    insert = (
        f'{{"connect_token": "{world.qm_token}", "application_environment": "PAYROLL", '
        '"classification": {"userid": "ATM01"}, "payload": 1}'
    )
    fast, framework = await _both(world, "/v1/work", world.qm, insert.encode())
    assert fast[0] == framework[0] == 201
    assert _comparable(fast[1]) == _comparable(framework[1])
    select = f'{{"connect_token": "{server}", "max_items": 1}}'.encode()
    fast, framework = await _both(world, "/v1/work/select", world.server_key, select)
    assert fast[0] == framework[0] == 200
    assert [item["payload"] for item in fast[1]["items"]] == [item["payload"] for item in framework[1]["items"]] == [1]


async def test_a_batch_insert_answers_alike_on_both_paths(world: World) -> None:
    item = '{"classification": {"userid": "ATM01"}, "payload": 1}'
    batch = f'{{"connect_token": "{world.qm_token}", "application_environment": "PAYROLL", "items": [{item}, {item}]}}'.encode()
    fast, framework = await _both(world, "/v1/work:batch", world.qm, batch)
    assert fast[0] == framework[0] == 201
    assert [_comparable(i) for i in fast[1]["items"]] == [_comparable(i) for i in framework[1]["items"]]
    bad = f'{{"connect_token": "{world.qm_token}", "application_environment": "PAYROLL", "items": [{item}, {{"payload": 1}}]}}'.encode()
    fast, framework = await _both(world, "/v1/work:batch", world.qm, bad)
    assert _error_shape(fast) == _error_shape(framework) == (422, "validation_failed", ["items[1].enclave_token"])


async def test_the_caller_is_checked_before_the_body(world: World) -> None:
    for headers in ({}, world.server_key):  # no key; a key without the queue manager role
        fast, framework = await _both(world, "/v1/work", headers, b"{}")
        assert fast == framework
        # The fast path does not even parse the body of a caller it refuses (FastAPI decodes it first).
        broken, _ = await _both(world, "/v1/work", headers, b"{")
        assert broken == fast
        assert fast[0] in (401, 403)


async def test_the_fast_path_is_counted_under_its_route(world: World) -> None:
    before = HTTP_REQUESTS.labels("POST", "/v1/work", "201")._value.get()
    await world.insert({"n": 1})
    assert HTTP_REQUESTS.labels("POST", "/v1/work", "201")._value.get() == before + 1
