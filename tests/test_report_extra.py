"""PySpark is the service's `report` extra: the API serves without it, `wlm report run` says what to install, and
the Dockerfile gives it to the report's image only."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import httpx
import pytest

from tests.processes import ServiceProcess

ROOT = Path(__file__).resolve().parent.parent
# Imported first by every Python process started with it on PYTHONPATH: `import pyspark` then raises ImportError,
# as in an installation without the extra.
NO_PYSPARK = "import sys\nsys.modules['pyspark'] = None\n"


@pytest.fixture
def without_pyspark(tmp_path: Path) -> dict[str, str]:
    """Environment variables under which `wlm` runs as if PySpark were not installed."""
    site = tmp_path / "no-pyspark"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_PYSPARK)
    return {"PYTHONPATH": str(site)}


def test_pyspark_is_only_in_the_report_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("pyspark")]
    assert [d for d in project["optional-dependencies"]["report"] if d.startswith("pyspark")]


def test_the_service_serves_without_pyspark(tmp_path, without_pyspark):
    service = ServiceProcess(tmp_path)
    service.env |= without_pyspark
    service.start()  # ready: migrated, Redis and the database answering
    try:
        assert httpx.get(f"{service.url}/openapi.json", timeout=10).status_code == 200
        shown = service.wlm("report", "run", "--date", "2026-11-26")
        assert shown.returncode == 1
        assert "Traceback" not in shown.stderr
        assert "wlm report run needs PySpark, the service's `report` extra" in shown.stderr
    finally:
        assert service.stop() == 0


def _stages(dockerfile: str) -> dict[str, list[str]]:
    """Each stage's instructions (continuation lines joined, comments left out), by stage name."""
    text = re.sub(r"\\\n\s*", " ", "\n".join(line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")))
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in filter(None, (line.strip() for line in text.splitlines())):
        if found := re.fullmatch(r"FROM (\S+) AS (\S+)", line, flags=re.IGNORECASE):
            current = stages[found[2]] = [line]
        else:
            current.append(line)
    return stages


def _built_from(stages: dict[str, list[str]], target: str) -> list[str]:
    """The instructions of `target` and of every stage it starts from or copies from."""
    instructions = stages[target]
    bases = [line.split()[1] for line in instructions if line.upper().startswith("FROM ")]
    bases += re.findall(r"COPY --from=(\S+)", "\n".join(instructions))
    return [line for base in bases if base in stages for line in _built_from(stages, base)] + instructions


def test_the_api_image_installs_no_pyspark_and_the_report_image_does():
    stages = _stages((ROOT / "Dockerfile").read_text())
    assert list(stages)[-1] == "api"  # the default target: `docker build -t wlm .` is the API's image
    api = "\n".join(_built_from(stages, "api"))
    assert "pyspark" not in api.lower() and "optional-dependencies" not in api and "openjdk" not in api
    assert "['project']['dependencies']" in api  # ... which are the service's own
    report = "\n".join(_built_from(stages, "report"))
    assert "['optional-dependencies']['report']" in report and "openjdk" in report
    assert stages["report"][-1] == 'CMD ["wlm", "report", "run", "--date", "yesterday"]'
