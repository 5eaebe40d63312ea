"""How the launcher runs a start command: `python` is the service's own interpreter, whose directory leads the PATH."""

from __future__ import annotations

import os

from app.scheduler.duties.launcher import launch_command, launch_path, log_tail

VENV_PYTHON = "/srv/wlm/.venv/bin/python"


def test_python_and_python3_are_the_services_interpreter():
    assert launch_command(["python", "-m", "app.examples.echo_server"], VENV_PYTHON) == [VENV_PYTHON, "-m", "app.examples.echo_server"]
    assert launch_command(["python3", "server.py"], VENV_PYTHON) == [VENV_PYTHON, "server.py"]


def test_any_other_program_runs_as_given():
    assert launch_command(["/usr/bin/python3", "server.py"], VENV_PYTHON) == ["/usr/bin/python3", "server.py"]
    assert launch_command(["python3.12", "server.py"], VENV_PYTHON) == ["python3.12", "server.py"]
    assert launch_command(["java", "-jar", "python"], VENV_PYTHON) == ["java", "-jar", "python"]


def test_the_interpreters_directory_leads_the_path_once():
    path = os.pathsep.join(["/usr/local/bin", "/srv/wlm/.venv/bin", "", "/usr/bin"])
    assert launch_path(path, VENV_PYTHON) == os.pathsep.join(["/srv/wlm/.venv/bin", "/usr/local/bin", "/usr/bin"])
    assert launch_path("", VENV_PYTHON) == "/srv/wlm/.venv/bin"


def test_a_failed_start_is_explained_by_the_end_of_its_log(tmp_path):
    log = tmp_path / "PAYROLL-1.log"
    log.write_text("".join(f"line {n}\n" for n in range(30)) + "ModuleNotFoundError: No module named 'httpx'\n")
    tail = log_tail(log, 3)
    assert tail == "line 28\nline 29\nModuleNotFoundError: No module named 'httpx'"
    assert "cannot be read" in log_tail(tmp_path / "missing.log")
