"""The deployment files are valid and carry the settings the product relies on.

These checks read the file with a YAML parser and assert what compose needs; where a compose binary is
installed (`docker-compose`, or the `docker compose` plugin), it must also accept the file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_services():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"api", "redis", "postgres", "spark-report"} <= set(services)
    redis_command = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis_command and "--maxmemory-policy noeviction" in redis_command
    # A 201 only once on disk by default: the Redis fsyncs before it replies, and the api is strict.
    assert "--appendfsync ${WLM_REDIS_APPENDFSYNC:-always}" in redis_command
    api = services["api"]
    assert api["environment"]["WLM_DURABILITY"] == "${WLM_DURABILITY:-strict}"
    assert api["stop_grace_period"] == "40s"  # beyond the shutdown grace (30 s), so a stop is never cut short
    assert api["environment"]["WLM_DATABASE_URL"].startswith("postgresql://")
    assert api["environment"]["WLM_REDIS_URL"].startswith("redis://")
    assert set(api["depends_on"]) == {"postgres", "redis"}
    assert services["spark-report"]["profiles"] == ["jobs"]
    # Scale-out: replicas behind the load balancer, which alone publishes the port.
    assert api["deploy"]["replicas"] == "${WLM_REPLICAS:-3}" and "ports" not in api
    assert services["lb"]["ports"] == ["8000:8000"]
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server api:8000" in nginx and "proxy_buffering off" in nginx
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source in compose["volumes"] or (ROOT / source).exists(), (name, volume)


def test_compose_binary_accepts_the_file_where_installed():
    commands = [[c] for c in ("docker-compose",) if shutil.which(c)]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        commands.append(["docker", "compose"])
    for command in commands:
        result = subprocess.run([*command, "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_dockerfile_runs_as_non_root_and_serves():
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert any(line.startswith("USER ") and line != "USER root" for line in lines)
    assert lines[-1] == 'CMD ["wlm", "serve"]'  # migrate, then uvicorn
    assert "EXPOSE 8000" in lines


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
