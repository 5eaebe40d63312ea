"""`wlm whatif` end to end, as operators run it on the service's data directory and database: a candidate the policy
install refuses exits 2 with its field errors, a day without records exits 3 (no_records), both before any Spark
work; a run prints predicted against recorded per class period, flags the class whose attainment would fall, and
writes its JSON result."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.processes import WLM
from tests.spark_jobs.what_if.records import DAY, RECORDED, as_stored, database_with, record, with_limits, write_day

pytestmark = pytest.mark.timeout(300)


def whatif(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WLM_")}
    env |= {
        "WLM_DATA_DIR": str(tmp_path / "data"),
        "WLM_SPARK_MASTER": "local[2]",
        "WLM_SPARK_DRIVER_MEMORY": "1g",
        "WLM_SPARK_CLASS_ARCHIVE": "false",
    }
    return subprocess.run([WLM, "whatif", *args], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)


@pytest.fixture
def recorded_day(tmp_path: Path) -> Path:
    """A day of PAYROLL: twenty ONLINE requests of 400 ms at once, each served at once, and a BATCH one."""
    stored = [as_stored(record("ONLINE", 60.0, 400), f"P~{i}") for i in range(20)]
    stored.append(as_stored(record("BATCH", 120.0, 2000, userid="CLERK"), "P~batch"))
    write_day(tmp_path / "data" / "records", stored)
    database_with(tmp_path / "data", RECORDED)
    return tmp_path


def write_candidate(tmp_path: Path, definition: dict, name: str = "candidate.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(definition) if name.endswith(".yaml") else json.dumps(definition))
    return path


def test_a_candidate_the_install_refuses_exits_2_with_its_field_errors(recorded_day: Path) -> None:
    broken = with_limits(RECORDED, min=3, max=2)
    broken["service_classes"][0].pop("importance")
    done = whatif(recorded_day, "--date", DAY.isoformat(), "--policy", str(write_candidate(recorded_day, broken)))
    assert done.returncode == 2, done.stderr
    assert "service_classes[0].importance" in done.stderr
    assert "application_environments[0].server_limits.min" in done.stderr
    assert not (recorded_day / "data" / "logs").exists()  # refused before any Spark work

    malformed = recorded_day / "malformed.yaml"
    malformed.write_text("name: [unclosed\n")
    done = whatif(recorded_day, "--date", DAY.isoformat(), "--policy", str(malformed))
    assert done.returncode == 2 and "malformed YAML" in done.stderr

    missing = whatif(recorded_day, "--date", DAY.isoformat(), "--policy", str(recorded_day / "nowhere.yaml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr

    # Longer than this service's tombstones cover (WLM_TOMBSTONE_SECONDS, 300 by default): an install would refuse it.
    too_long = copy.deepcopy(RECORDED)
    too_long["application_environments"][0]["completion_time_ms"] = 3_600_000
    done = whatif(recorded_day, "--date", DAY.isoformat(), "--policy", str(write_candidate(recorded_day, too_long, "long.json")))
    assert done.returncode == 2, done.stderr
    assert "application_environments[0].completion_time_ms" in done.stderr and "WLM_TOMBSTONE_SECONDS" in done.stderr


def test_a_day_without_records_exits_3(recorded_day: Path) -> None:
    done = whatif(recorded_day, "--date", "2026-11-21", "--policy", str(write_candidate(recorded_day, RECORDED, "same.json")))
    assert done.returncode == 3, done.stderr
    assert "no_records" in done.stderr
    assert not (recorded_day / "data" / "logs").exists()


def test_a_run_prints_the_classes_and_flags_the_one_that_would_fall(recorded_day: Path) -> None:
    output = recorded_day / "result.json"
    candidate = write_candidate(recorded_day, with_limits(RECORDED, min=1, max=1))
    done = whatif(
        recorded_day, "--date", DAY.isoformat(), "--policy", str(candidate), "--seed", "5", "--output", str(output), "--interval", "5"
    )
    assert done.returncode == 0, done.stderr + done.stdout
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("PAYROLL")}
    assert lines["ONLINE"].endswith("FALLS")
    assert not lines["BATCH"].endswith("FALLS")
    assert "1 class periods would meet their goal less often" in done.stdout
    result = json.loads(output.read_text())
    assert result["seed"] == 5 and result["date"] == DAY.isoformat()
    [payroll] = result["environments"]
    # Per 5 minutes, as asked (the report's --interval), and the whole day, on both sides.
    assert result["interval_minutes"] == 5
    for side in ("predicted", "actual"):
        assert {row["interval_minutes"] for row in payroll[side]["classes"]} == {5, 1440}
    assert payroll["arrivals"] == 21 and payroll["kept_recorded_class"] == 21
    # The stages on stderr, as the API shows a run's progress.
    assert "replaying each application environment" in done.stderr


def test_an_interval_that_does_not_divide_the_day_exits_2(recorded_day: Path) -> None:
    candidate = write_candidate(recorded_day, RECORDED, "same.json")
    done = whatif(recorded_day, "--date", DAY.isoformat(), "--policy", str(candidate), "--interval", "7")
    assert done.returncode == 2 and "divides a day" in done.stderr
