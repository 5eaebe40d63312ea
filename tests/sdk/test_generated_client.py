"""A client generated from the served OpenAPI document with openapi-python-client, as a user in another project
would make one, drives a request through its life on the real app (real Redis and database)."""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI

from tests.conftest import ADMIN_KEY, EXAMPLE_POLICY, make_key

pytestmark = pytest.mark.asyncio

GENERATOR = str(Path(sys.executable).parent / "openapi-python-client")
PACKAGE = "wlm_generated_client"
# The generator's post hooks would run ruff over the code; the test needs none of that.
GENERATOR_CONFIG = f"post_hooks: []\npackage_name_override: {PACKAGE}\n"


@pytest.fixture
def generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], ModuleType]]:
    """Imports a module of the package generated into tmp_path; the package is forgotten after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield lambda name: importlib.import_module(f"{PACKAGE}.{name}")
    for module in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
        del sys.modules[module]


async def _generate(spec: dict[str, Any], directory: Path) -> str:
    """Generates the client package into `directory`; returns the generator's output (its warnings)."""
    (directory / "openapi.json").write_text(json.dumps(spec))
    (directory / "generator.yaml").write_text(GENERATOR_CONFIG)
    command = [
        GENERATOR, "generate", "--path", str(directory / "openapi.json"), "--config", str(directory / "generator.yaml"),
        "--meta", "none", "--output-path", str(directory / PACKAGE),
    ]  # fmt: skip
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _operation_ids(spec: dict[str, Any]) -> set[str]:
    return {operation["operationId"] for operations in spec["paths"].values() for operation in operations.values()}


def _key(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


async def test_a_generated_client_drives_a_request_through_its_life(client: httpx.AsyncClient, app: FastAPI, tmp_path: Path, generated):
    spec = (await client.get("/openapi.json")).json()
    output = await _generate(spec, tmp_path)
    # Every operation is generated, as a module named by its id; the one warning is the policy's YAML body (its
    # JSON body is generated).
    modules = {path.stem for path in (tmp_path / PACKAGE / "api").glob("*/*.py")} - {"__init__"}
    assert modules == {operation_id.replace("-", "_") for operation_id in _operation_ids(spec)}
    assert output.count("WARNING") == 1 and "Unsupported content type application/yaml" in output, output
    # The application environment's API is one module of the client, its operations named as they always were.
    environments = {path.stem for path in (tmp_path / PACKAGE / "api" / "application_environments").glob("*.py")} - {"__init__"}
    assert environments == {
        "application_environments_define_dynamic_environment",
        "operator_display_application_environments",
        "operator_display_application_environment",
        "goals_and_servers_set_server_limits",
        "goals_and_servers_server_limits",
        "goals_and_servers_reset_server_limits",
        "routing_alter_instance",
    }

    models = generated("models")
    work = {name: generated(f"api.work.work_{name}") for name in ("create_enclave", "insert", "select", "begin", "end")}
    connect = generated("api.connections.connections_connect")
    disconnect = generated("api.connections.connections_disconnect")
    install = generated("api.policy.policy_install_policy")
    qm_key = _key(await make_key(client, "qm", ["queue_manager"]))
    server_key = _key(await make_key(client, "srv", ["server"], ["CB.*.PAYROLL"]))

    def as_caller(key: str) -> Any:
        # An undeclared status would raise: every answer below is one the document declares.
        transport = httpx.ASGITransport(app=app)
        return generated("client").AuthenticatedClient(
            base_url="http://wlm", token=key, httpx_args={"transport": transport}, raise_on_unexpected_status=True
        )

    async with as_caller(ADMIN_KEY) as admin, as_caller(qm_key) as qm, as_caller(server_key) as server:
        # The example policy file as it is (report classes by bare name) loads into the generated model.
        definition = yaml.safe_load(EXAMPLE_POLICY)
        installed = await install.asyncio(client=admin, body=models.ServiceDefinition.from_dict(definition))
        assert isinstance(installed, models.PolicyInstallOut) and installed.version == 1

        queue_manager = await connect.asyncio(
            client=qm, body=models.QueueManagerConnect(role="queue_manager", subsystem_type="CB", subsystem_name="BANK1")
        )
        assert isinstance(queue_manager, models.ConnectionCreated)
        enclave = await work["create_enclave"].asyncio(
            client=qm,
            body=models.EnclaveIn(
                connect_token=queue_manager.token, classification=models.EnclaveInClassification.from_dict({"userid": "ATM01"})
            ),
        )
        assert isinstance(enclave, models.EnclaveOut) and enclave.service_class == "ONLINE"
        queued = await work["insert"].asyncio(
            client=qm,
            body=models.WorkIn(
                connect_token=queue_manager.token, application_environment="PAYROLL", enclave_token=enclave.token, payload={"n": 1}
            ),
        )
        assert isinstance(queued, models.WorkQueued) and queued.service_class == "ONLINE"

        connected = await connect.asyncio(
            client=server,
            body=models.ServerConnect(role="server", subsystem_type="CB", subsystem_name="BANK1", application_environment="PAYROLL"),
        )
        assert isinstance(connected, models.ConnectionCreated)
        selected = await work["select"].asyncio(client=server, body=models.SelectIn(connect_token=connected.token, wait_seconds=5))
        assert isinstance(selected, models.SelectOut)
        assert [(item.token, item.payload) for item in selected.items] == [(queued.token, {"n": 1})]
        begun = await work["begin"].asyncio(queued.token, client=server, body=models.TokenOnly(connect_token=connected.token))
        assert isinstance(begun, models.BegunOut) and begun.state == "begun"
        ended = await work["end"].asyncio(
            queued.token,
            client=server,
            body=models.EndRequest(connect_token=connected.token, outcome=models.EndRequestOutcome.COMPLETED, result={"ok": True}),
        )
        assert isinstance(ended, models.EndedOut) and ended.outcome == "completed"
        display = generated("api.application_environments.operator_display_application_environment")
        shown = await display.asyncio("PAYROLL", client=admin)
        assert isinstance(shown, models.ApplicationEnvironmentOut) and (shown.name, shown.servers, shown.queued_total) == ("PAYROLL", 1, 0)

        # An error comes back as the declared error body, parsed.
        unknown = await work["begin"].asyncio_detailed("no-such-token", client=server, body=models.TokenOnly(connect_token=connected.token))
        assert unknown.status_code == 404
        assert isinstance(unknown.parsed, models.ErrorBody) and unknown.parsed.error.code == "unknown_work"

        for caller, token in ((server, connected.token), (qm, queue_manager.token)):
            gone = await disconnect.asyncio(token, client=caller)
            assert isinstance(gone, models.DisconnectOut) and gone.state == "disconnected"
