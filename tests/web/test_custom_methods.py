"""One path style (app/web/custom_methods.py): custom methods at `:verb` paths, and their former `/verb` paths served one
more release, deprecated in the OpenAPI document and answered with `Deprecation` and a `Link` to the new path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.config import Settings
from app.main import create_app
from app.web.custom_methods import DEPRECATED_SINCE
from tests.conftest import ADMIN
from tests.work.conftest import World, make_world

# Former path -> its successor, by method.
FORMER = {
    ("post", "/v1/dead-letters/retry"): "/v1/dead-letters:retry",
    ("post", "/v1/dead-letters/discard"): "/v1/dead-letters:discard",
    ("post", "/v1/dead-letters/{token}/retry"): "/v1/dead-letters/{token}:retry",
    ("post", "/v1/policy/classify"): "/v1/policy:classify",
    ("get", "/v1/routing/explain"): "/v1/routing:explain",
}


def test_the_openapi_document_has_the_new_paths_and_marks_the_former_deprecated(tmp_path: Path) -> None:
    paths = create_app(Settings(data_dir=tmp_path / "data")).openapi()["paths"]
    for (method, former), successor in FORMER.items():
        old, new = paths[former][method], paths[successor][method]
        assert old["deprecated"] is True and "deprecated" not in new, former
        assert old["operationId"] == new["operationId"] + "-former-path"
        assert successor in old["description"]
        assert (old["responses"], old.get("requestBody"), old.get("parameters")) == (
            new["responses"],
            new.get("requestBody"),
            new.get("parameters"),
        )
    # No other custom method is left in the `/verb` style beside the IWM calls the contract names.
    verbs = {"retry", "discard", "classify", "explain", "batch"}
    slashed = {(method, path) for path, operations in paths.items() for method in operations if path.rsplit("/", 1)[-1] in verbs}
    assert slashed == set(FORMER)


def _deprecated(response: Any, successor: str, status: int = 200) -> None:
    assert response.status_code == status, response.text
    assert response.headers["Deprecation"] == DEPRECATED_SINCE
    assert response.headers["Link"] == f'<{successor}>; rel="successor-version"'


async def _dead_letter(world: World, server: str) -> str:
    token = (await world.insert({"n": 1}))["token"]
    assert [i["token"] for i in (await world.select(server)).json()["items"]] == [token]
    await world.end(server, token, outcome="failed", dead_letter=True, error="bad input")
    return token


@pytest.mark.asyncio
async def test_the_former_dead_letter_paths_still_act_and_say_they_are_deprecated(client) -> None:
    world = await make_world(client)
    server = await world.server(tasks=10)

    token = await _dead_letter(world, server)
    retried = await client.post(f"/v1/dead-letters/{token}/retry", headers=ADMIN, json={"position": "front"})
    _deprecated(retried, f"/v1/dead-letters/{token}:retry")
    assert retried.json()["life"] == 2
    await world.end(server, (await world.select(server)).json()["items"][0]["token"], outcome="failed", dead_letter=True)

    _deprecated(bulk := await client.post("/v1/dead-letters/retry", headers=ADMIN, json={"all": True}), "/v1/dead-letters:retry")
    assert bulk.json()["tokens"] == [token]
    await world.end(server, (await world.select(server)).json()["items"][0]["token"], outcome="failed", dead_letter=True)

    _deprecated(gone := await client.post("/v1/dead-letters/discard", headers=ADMIN, json={"all": True}), "/v1/dead-letters:discard")
    assert gone.json()["tokens"] == [token]
    # An error answer carries the notice too: the dead letter is gone, or the caller has no key.
    _deprecated(await client.post(f"/v1/dead-letters/{token}/retry", headers=ADMIN, json={}), f"/v1/dead-letters/{token}:retry", 404)
    _deprecated(await client.post("/v1/dead-letters/discard", json={"all": True}), "/v1/dead-letters:discard", 401)
    # The new paths answer without the notice.
    again = await _dead_letter(world, server)
    new = await client.post(f"/v1/dead-letters/{again}:retry", headers=ADMIN, json={})
    assert new.status_code == 200 and "Deprecation" not in new.headers and "Link" not in new.headers


@pytest.mark.asyncio
async def test_former_classify_and_explain_answer_as_the_new_paths_do(client) -> None:
    await make_world(client)
    classify = {"subsystem_type": "CB", "attributes": {"userid": "ATM01"}}
    old = await client.post("/v1/policy/classify", headers=ADMIN, json=classify)
    _deprecated(old, "/v1/policy:classify")
    assert old.json() == (await client.post("/v1/policy:classify", headers=ADMIN, json=classify)).json()

    params = {"application_environment": "PAYROLL"}
    old = await client.get("/v1/routing/explain", headers=ADMIN, params=params)
    _deprecated(old, "/v1/routing:explain")
    new = await client.get("/v1/routing:explain", headers=ADMIN, params=params)
    assert new.status_code == 200 and "Deprecation" not in new.headers
    assert old.json()["chosen"] == new.json()["chosen"]
