"""`pip install ./sdk/python` installs the SDK and httpx, no part of the service (issue 38's acceptance).

The SDK is built and installed without an index (--no-index --no-deps --no-build-isolation, on this venv's
setuptools) into a directory of its own, as a fresh venv would get it. What pip would install with it is the closure
of its declared requirements over the distributions installed here: the releases a fresh venv would resolve today."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent.parent
SDK = ROOT / "sdk" / "python"
# Distributions of the service that a queue manager or a server must not get with the SDK.
SERVICE_ONLY = {"wlm", "fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "pyspark", "pyarrow", "redis", "pydantic"}
# ... and their top-level modules, with the service's own.
SERVICE_MODULES = (SERVICE_ONLY - {"wlm"}) | {"app", "spark_jobs"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK as `pip install` lays it out, without its dependencies. Built from a copy: setuptools writes build/
    and egg-info next to the sources, where a parallel test's build would meet it."""
    scratch = tmp_path_factory.mktemp("sdk")
    source = shutil.copytree(SDK, scratch / "source", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = scratch / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--target", str(target), str(source)], check=True, capture_output=True, timeout=120)
    return target


def _closure(requirements: list[str]) -> set[str]:
    """The distributions these requirements pull in, recursively, as installed here (extras not asked for left out)."""
    found: set[str] = set()
    todo = [Requirement(text) for text in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found or (requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})):
            continue
        found.add(name)
        todo += [Requirement(text) for text in importlib.metadata.distribution(name).requires or []]
    return found


def test_the_sdk_declares_httpx_only_and_pulls_in_no_part_of_the_service(installed):
    [sdk] = importlib.metadata.distributions(path=[str(installed)])
    assert (sdk.metadata["Name"], sdk.requires) == ("wlm-client", ["httpx>=0.27"])
    assert any(str(file) == "wlm_client/py.typed" for file in sdk.files or [])
    pulled = _closure(sdk.requires)
    assert "httpx" in pulled and pulled & SERVICE_ONLY == set(), sorted(pulled)


def test_the_installed_sdk_imports_no_part_of_the_service(installed):
    script = (
        f"import sys; sys.path.insert(0, {str(installed)!r}); import wlm_client; "
        "print(wlm_client.__file__); print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    result = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60)
    location, modules = result.stdout.splitlines()
    assert Path(location).is_relative_to(installed)
    assert set(modules.split()) & SERVICE_MODULES == set()
