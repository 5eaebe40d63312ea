"""deploy/kubernetes: every manifest valid against the Kubernetes schemas (kubernetes-validate, which ships them) and
KEDA's own CRDs (tests/kubernetes_schemas), strictly, so a misspelt field fails; and every name a manifest relies on
exists: the commands, settings, probe paths and the scaling metric in the service, the secrets in the example, the
Deployment a ScaledObject scales."""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from app.cli import build_parser
from app.config import Settings
from app.main import create_app

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "deploy" / "kubernetes"
CRDS = Path(__file__).resolve().parent / "kubernetes_schemas"
# The oldest Kubernetes the manifests are for (CronJob timeZone is GA from 1.27) and the newest schemas at hand.
KUBERNETES_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
SCALING_ROUTE = "/v1/scaling/application-environments/{name}"


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _all_files() -> list[Path]:
    return sorted(MANIFESTS.rglob("*.yaml"))


def _resources() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in _all_files() if path.name != "kustomization.yaml" for doc in _documents(path)]


def _of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in _resources() if doc["kind"] == kind]


def _pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for _, doc in _resources():
        spec = doc.get("spec", {})
        if doc["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if doc["kind"] in ("Deployment", "Job", "CronJob"):
            yield doc["metadata"]["name"], spec["template"]["spec"]


def _containers() -> Iterator[tuple[str, dict[str, Any]]]:
    for owner, pod in _pod_specs():
        for container in pod["containers"]:
            yield owner, container


def _strict(schema: Any) -> Any:
    """A CRD's schema as `kubectl apply` with strict field validation reads it: no field it does not name."""
    if isinstance(schema, dict):
        schema = {key: _strict(value) for key, value in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_strict(item) for item in schema]
    return schema


def _crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    schemas = {}
    for path in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            api_version = f"{crd['spec']['group']}/{version['name']}"
            schemas[(api_version, crd["spec"]["names"]["kind"])] = _strict(version["schema"]["openAPIV3Schema"])
    return schemas


@pytest.fixture(scope="module")
def service_app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return create_app(Settings(data_dir=tmp_path_factory.mktemp("data")))


@pytest.mark.parametrize("path", _all_files(), ids=lambda path: str(path.relative_to(MANIFESTS)))
def test_every_manifest_is_valid(path: Path) -> None:
    crds = _crd_schemas()
    for doc in _documents(path):
        if path.name == "kustomization.yaml":
            assert doc["kind"] == "Kustomization"
            continue
        if (doc["apiVersion"], doc["kind"]) in crds:
            jsonschema.validate(doc, crds[(doc["apiVersion"], doc["kind"])])
            continue
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def test_a_misspelt_field_is_caught() -> None:
    """The validation above rejects what it should: a field no schema names, in Kubernetes' kinds and KEDA's."""
    deployment = _of_kind("Deployment")[0]
    misspelt = {**deployment, "spec": {**deployment["spec"], "replica": 3}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSIONS[-1], strict=True)
    scaled = _of_kind("ScaledObject")[0]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**scaled, "spec": {**scaled["spec"], "pollingIntervall": 10}}, _crd_schemas()[("keda.sh/v1alpha1", "ScaledObject")]
        )


def test_kustomization_names_every_manifest_but_the_secrets_and_the_servers() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    top_level = {path.name for path in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml", "secrets.example.yaml"}
    assert set(kustomization["resources"]) == top_level


def test_commands_are_the_service_s_own() -> None:
    for owner, container in _containers():
        command = container["command"] + container.get("args", [])
        if command[0] == "wlm":
            try:
                build_parser().parse_args(command[1:])
            except SystemExit:
                pytest.fail(f"{owner}: `{shlex.join(command)}` is not a wlm command")
        elif command[:2] == ["python", "-m"]:
            assert importlib.util.find_spec(command[2]) is not None, (owner, command)
        else:
            assert command[0] == "sleep", (owner, command)


def test_settings_and_secrets_exist() -> None:
    settings = {f"WLM_{name.upper()}" for name in Settings.model_fields}
    echo_server = (ROOT / "app" / "examples" / "echo_server.py").read_text()
    secrets = {(doc["metadata"]["name"], key) for doc in _documents(MANIFESTS / "secrets.example.yaml") for key in doc["stringData"]}
    for owner, container in _containers():
        for variable in container.get("env", []):
            known = echo_server if container["command"][:3] == ["python", "-m", "app.examples.echo_server"] else settings
            assert variable["name"] in known, (owner, variable["name"])
            reference = variable.get("valueFrom", {}).get("secretKeyRef")
            if reference:
                assert (reference["name"], reference["key"]) in secrets, (owner, reference)


def test_volumes_claim_what_is_declared() -> None:
    claims = {doc["metadata"]["name"] for doc in _of_kind("PersistentVolumeClaim")}
    for owner, pod in _pod_specs():
        for volume in pod.get("volumes", []):
            assert volume["persistentVolumeClaim"]["claimName"] in claims, owner


def test_the_api_s_probes_service_and_budget_match(service_app: Any) -> None:
    (api,) = [doc for doc in _of_kind("Deployment") if doc["metadata"]["name"] == "wlm-api"]
    pod = api["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    paths = {path for path, operations in service_app.openapi()["paths"].items() if "get" in operations}
    probes = {container["readinessProbe"]["httpGet"]["path"], container["livenessProbe"]["httpGet"]["path"]}
    assert probes == {"/readyz", "/healthz"} and probes <= paths
    labels = pod["metadata"]["labels"]
    for selector in [_of_kind("Service")[0]["spec"]["selector"], _of_kind("PodDisruptionBudget")[0]["spec"]["selector"]["matchLabels"]]:
        assert selector.items() <= labels.items()
    # The pause before SIGTERM, then the service's own grace for open requests, within what Kubernetes waits.
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pause + Settings().shutdown_grace_seconds < pod["spec"]["terminationGracePeriodSeconds"]
    assert api["spec"]["replicas"] == 3


def test_each_scaled_object_reads_the_service_s_decision_for_a_deployment_of_its_environment(service_app: Any) -> None:
    deployments = {doc["metadata"]["name"]: doc for doc in _of_kind("Deployment")}
    authentications = {doc["metadata"]["name"]: doc for doc in _of_kind("TriggerAuthentication")}
    secrets = {doc["metadata"]["name"]: doc for doc in _documents(MANIFESTS / "secrets.example.yaml")}
    openapi = service_app.openapi()
    scaling = openapi["paths"][SCALING_ROUTE]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    answer = openapi["components"]["schemas"][scaling.rsplit("/", 1)[1]]["properties"]
    policy = yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text())
    environments = {ae["name"] for ae in policy["application_environments"]}
    scaled_objects = _of_kind("ScaledObject")
    assert scaled_objects
    for scaled in scaled_objects:
        (trigger,) = scaled["spec"]["triggers"]
        assert trigger["type"] == "metrics-api" and trigger["metricType"] == "Value"
        url = trigger["metadata"]["url"]
        match = re.fullmatch(r"http://wlm\.wlm\.svc:(\d+)(/v1/scaling/application-environments/)([A-Z0-9$#@_.-]+)", url)
        assert match, url
        assert int(match[1]) == _of_kind("Service")[0]["spec"]["ports"][0]["port"]
        assert match[3] in environments
        assert trigger["metadata"]["valueLocation"] in answer
        target = deployments[scaled["spec"]["scaleTargetRef"]["name"]]
        (container,) = target["spec"]["template"]["spec"]["containers"]
        assert {"name": "WLM_APPLICATION_ENVIRONMENT", "value": match[3]} in container["env"]
        authentication = authentications[trigger["authenticationRef"]["name"]]
        for reference in authentication["spec"]["secretTargetRef"]:
            assert reference["key"] in secrets[reference["name"]]["stringData"]
