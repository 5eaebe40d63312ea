"""The service definition over HTTP: install, read, versions, classify, and every refusal a new user meets."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import ADMIN, EXAMPLE_POLICY, install_policy, make_key, running_app

pytestmark = pytest.mark.asyncio

MINIMAL = {"name": "MINI", "service_classes": [{"name": "FAST", "importance": 1, "goal": {"type": "average", "response_time_ms": 100}}]}


def _put(client, body: bytes | str, media: str = "application/yaml", headers=ADMIN, **params):
    return client.put("/v1/policy", headers={**headers, "Content-Type": media}, content=body, params=params)


async def test_example_policy_installs_unchanged_and_reads_back(client):
    installed = await install_policy(client)
    assert installed["version"] == 1 and installed["changed"] is True and installed["name"] == "PRODPLEX"
    active = (await client.get("/v1/policy", headers=ADMIN)).json()
    assert active["version"] == 1 and active["installed_by"] == "admin"
    original = yaml.safe_load(EXAMPLE_POLICY)
    names = [sc["name"] for sc in active["definition"]["service_classes"]]
    assert names == [sc["name"] for sc in original["service_classes"]]
    assert active["definition"]["application_environments"][0]["start_command"] == ["python", "-m", "app.examples.echo_server"]


async def test_same_document_again_changes_nothing_and_new_one_activates(client):
    await install_policy(client)
    again = await install_policy(client)
    assert again["version"] == 1 and again["changed"] is False
    second = await install_policy(client, json.dumps(MINIMAL), "application/json")
    assert second["version"] == 2 and second["changed"] is True
    active = (await client.get("/v1/policy", headers=ADMIN)).json()
    assert active["version"] == 2 and active["name"] == "MINI"
    versions = (await client.get("/v1/policy/versions", headers=ADMIN)).json()
    assert [v["version"] for v in versions["items"]] == [2, 1] and versions["total"] == 2
    first = (await client.get("/v1/policy/versions/1", headers=ADMIN)).json()
    assert first["name"] == "PRODPLEX"
    missing = await client.get("/v1/policy/versions/9", headers=ADMIN)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_policy_version"


async def test_install_is_audited(client):
    await install_policy(client)
    events = (await client.get("/v1/audit", headers=ADMIN, params={"action": "policy.install"})).json()["items"]
    assert len(events) == 1
    assert events[0]["actor"] == "admin" and events[0]["target"] == "PRODPLEX" and events[0]["detail"]["version"] == 1


async def test_dry_run_validates_without_installing(client):
    response = await _put(client, EXAMPLE_POLICY, dry_run="true")
    assert response.status_code == 200 and response.json()["dry_run"] is True
    assert (await client.get("/v1/policy", headers=ADMIN)).status_code == 404


async def test_policy_as_yaml(client):
    await install_policy(client)
    response = await client.get("/v1/policy", headers={**ADMIN, "Accept": "application/yaml"})
    assert response.headers["content-type"].startswith("application/yaml")
    assert yaml.safe_load(response.text)["name"] == "PRODPLEX"


async def test_no_policy_yet_is_404_with_hint(client):
    response = await client.get("/v1/policy", headers=ADMIN)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_policy" and "PUT /v1/policy" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "media", "status", "code"),
    [
        (b"name: [unclosed", "application/yaml", 400, "malformed_document"),
        (b'{"name": ', "application/json", 400, "malformed_document"),
        (b"", "application/yaml", 400, "malformed_document"),
        (b"\xff\xfe", "application/yaml", 400, "malformed_document"),
        (b"- just\n- a list", "application/yaml", 422, "validation_failed"),
        (b"a: &x [1]\nb: *x", "application/yaml", 400, "malformed_document"),
        (b"name: X", "application/xml", 415, "unsupported_media_type"),
        (b"[" * 5000 + b"]" * 5000, "application/json", 400, "malformed_document"),
    ],
    ids=["bad-yaml", "bad-json", "empty", "not-utf8", "not-a-mapping", "yaml-alias", "xml", "deep-nesting"],
)
async def test_malformed_documents(client, body, media, status, code):
    response = await _put(client, body, media)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


async def test_malformed_yaml_names_the_line(client):
    response = await _put(client, b"name: X\nservice_classes:\n  - name: [\n")
    error = response.json()["error"]
    assert response.status_code == 400 and error["line"] >= 3 and "line" in error["message"]


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d["service_classes"][0].update(importance=6), "service_classes[0].importance"),
        (lambda d: d["service_classes"][1]["periods"][0].pop("goal"), "service_classes[1].periods[0].goal"),
        (lambda d: d["service_classes"][0].update(importance="high"), "service_classes[0].importance"),
        (lambda d: d["service_classes"][0]["goal"].update(response_time_ms=-5), "service_classes[0].goal.response_time_ms"),
        (lambda d: d["service_classes"][0]["goal"].update(type="fastest"), "service_classes[0].goal.type"),
        (lambda d: d["classification"][0]["rules"][0].update(service_class="NOPE"), "classification[0].rules[0].service_class"),
        (
            lambda d: d["classification"][0]["rules"][0]["rules"][0].update(report_class="NOPE"),
            "classification[0].rules[0].rules[0].report_class",
        ),
        (
            lambda d: d["service_classes"].append({"name": "online", "importance": 2, "goal": {"type": "velocity", "velocity": 10}}),
            "service_classes[3].name",
        ),
        (lambda d: d["application_environments"][0]["server_limits"].update(min=9), "application_environments[0].server_limits.min"),
        (lambda d: d["application_environments"][0].update(serverlimits={}), "application_environments[0].serverlimits"),
        (lambda d: d.pop("service_classes"), "service_classes"),
    ],
    ids=[
        "importance-6",
        "period-without-goal",
        "wrong-type",
        "negative-time",
        "unknown-goal-type",
        "unknown-class",
        "unknown-report-class-nested",
        "duplicate-name",
        "min-over-max",
        "typo-field",
        "missing-classes",
    ],
)
async def test_invalid_definitions_name_the_offending_field(client, mutate, path):
    document = yaml.safe_load(EXAMPLE_POLICY)
    mutate(document)
    response = await _put(client, json.dumps(document), "application/json")
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_failed"
    assert path in [e["path"] for e in error["errors"]], error
    assert (await client.get("/v1/policy", headers=ADMIN)).status_code == 404  # nothing half-installed


async def test_oversized_document_is_413(client, app):
    limit = app.state.wlm.settings.max_policy_bytes
    response = await _put(client, b"name: X\n#" + b"x" * limit)
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"


async def test_only_admins_install(client):
    viewer = await make_key(client, "viewer1", ["viewer"])
    response = await _put(client, EXAMPLE_POLICY, headers=viewer)
    assert response.status_code == 403 and response.json()["error"]["code"] == "missing_role"
    assert response.json()["error"]["required_roles"] == ["admin"]
    await install_policy(client)
    assert (await client.get("/v1/policy", headers=viewer)).status_code == 200


@pytest.mark.parametrize(
    ("attributes", "service_class", "report_class", "path"),
    [
        ({"userid": "ATM01"}, "ONLINE", "ATMA", ["UI=ATM*"]),
        ({"userid": "ATM01", "transaction_name": "CASH"}, "ONLINE", "CASHA", ["UI=ATM*", "TN=CASH"]),
        ({"TC": "RPT7"}, "REPORTS", "RPTS", ["TC=RPT?"]),
        ({"userid": "BOB"}, "BATCH", None, []),
    ],
)
async def test_classify_with_the_active_policy(client, attributes, service_class, report_class, path):
    await install_policy(client)
    qm = await make_key(client, "qm-classify", ["queue_manager"])
    response = await client.post("/v1/policy:classify", headers=qm, json={"subsystem_type": "cb", "attributes": attributes})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["service_class"], body["report_class"], body["matched_rules"]) == (service_class, report_class, path)


async def test_classify_refuses_unknown_attributes(client):
    await install_policy(client)
    response = await client.post("/v1/policy:classify", headers=ADMIN, json={"subsystem_type": "CB", "attributes": {"colour": "red"}})
    assert response.status_code == 422 and response.json()["error"]["errors"][0]["path"] == "attributes.colour"


async def test_a_completion_time_longer_than_the_tombstones_bound_is_refused_at_install_and_at_start(client, app, settings):
    longest = settings.longest_completion_ms  # WLM_TOMBSTONE_SECONDS less the heartbeat timeout and the margin
    document = yaml.safe_load(EXAMPLE_POLICY)
    document["application_environments"][0]["completion_time_ms"] = longest + 1
    refused = await _put(client, json.dumps(document), "application/json")
    assert refused.status_code == 422, refused.text
    [error] = [e for e in refused.json()["error"]["errors"] if e["path"] == "application_environments[0].completion_time_ms"]
    assert "WLM_TOMBSTONE_SECONDS" in error["message"]

    document["application_environments"][0]["completion_time_ms"] = longest
    assert (await _put(client, json.dumps(document), "application/json")).status_code == 200
    # A replica whose tombstones would not outlive that completion time refuses to start.
    shorter = settings.model_copy(update={"tombstone_seconds": settings.tombstone_seconds - 1})
    with pytest.raises(RuntimeError, match="completion_time_ms .* WLM_TOMBSTONE_SECONDS"):
        async with running_app(shorter):
            pass
