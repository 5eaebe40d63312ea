"""The OpenAPI document against the service that serves it: schemathesis (its settings in schemathesis.toml) sends
generated requests, valid and invalid, to every operation of a real `wlm serve` and fails on a 5xx, on a response the
document does not declare, on a schema-valid request refused by a check the document does not state, and on an
invalid one accepted. A bounded sample with a fixed seed; docs/benchmarks.md gives the full run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_KEY, bearer
from tests.processes import ServiceProcess

ROOT = Path(__file__).resolve().parent.parent
SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")
# A few cases per operation: about 1,800 requests in all, most of them the coverage phase's edge cases.
EXAMPLES_PER_OPERATION = 2


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    yield from ServiceProcess.running(tmp_path_factory.mktemp("fuzz"), bootstrap_admin_key=ADMIN_KEY)


def fuzzing_environment(url: str) -> dict[str, str]:
    """The example policy, a key whose principal has every role (so each operation is reached beyond its role check),
    and the spare key and principal that schemathesis.toml lets the fuzzer revoke and change."""
    with httpx.Client(base_url=url, headers=bearer(ADMIN_KEY), timeout=30) as admin:
        policy = admin.put(
            "/v1/policy", content=(ROOT / "examples" / "policy.yaml").read_bytes(), headers={"Content-Type": "application/yaml"}
        )
        assert policy.status_code == 200, policy.text
        principals = [("fuzzer", ["admin", "queue_manager", "server"], ["*"]), ("spare", ["viewer"], [])]
        keys = {}
        for name, roles, permits in principals:
            assert admin.post("/v1/principals", json={"name": name, "roles": roles, "permits": permits}).status_code == 201
            key = admin.post("/v1/api-keys", json={"principal": name})
            assert key.status_code == 201, key.text
            keys[name] = key.json()
    return {"WLM_FUZZ_KEY": keys["fuzzer"]["key"], "WLM_FUZZ_SPARE_KEY_ID": keys["spare"]["id"], "WLM_FUZZ_SPARE_PRINCIPAL": "spare"}


# About a minute of its own on a quiet machine; make test runs it beside the other worker's tests.
@pytest.mark.timeout(300)
def test_every_operation_answers_as_its_schema_says(service: ServiceProcess, tmp_path: Path) -> None:
    environment = os.environ | fuzzing_environment(service.url)
    command = [
        SCHEMATHESIS,
        "--config-file",
        str(ROOT / "schemathesis.toml"),
        "run",
        f"{service.url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(EXAMPLES_PER_OPERATION),
        "--seed",
        "1",
        "--workers",
        "1",
        "--no-color",
    ]
    # Run from a scratch directory: schemathesis writes its reports and Hypothesis its files where it runs.
    run = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300, check=False)
    summary = run.stdout[run.stdout.find("SUMMARY") :]
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]
    assert "Selected: 68/68" in summary and "Tested: 68" in summary, summary
