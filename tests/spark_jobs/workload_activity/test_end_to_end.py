"""End to end: requests through the running service and its launched servers, the nightly job run as operators run
it (`wlm report run`), and the report read back from the API, equal to what the test counts itself. The job's first
run, which writes the JVM's class archive, shows a line per stage and its summary, and keeps the JVM's warnings and
Spark's logging in its log."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.work import records
from spark_jobs.common.class_archive import archive_name
from tests.conftest import ADMIN_KEY, EXAMPLE_POLICY
from tests.processes import WLM, ServiceProcess
from tests.waiting import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300)]
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
ECHO = [sys.executable, "-m", "app.examples.echo_server"]
# userid ATM* is classified ONLINE (percentile goal), anything else BATCH (average goal): see examples/policy.yaml.
REQUESTS = {"ATM01": 200, "CLERK": 100}
# What the JVM and Spark print for developers: warnings of the JVM, of its class archive and of Spark's logging, and
# the classpath the JVM that assembles an ahead-of-time cache was given.
DEVELOPER_NOISE = re.compile(r"WARN|\[warning\]|\[error\]|WARNING:|log4j|Picked up JAVA_TOOL_OPTIONS")


async def test_requests_through_the_service_come_back_in_the_report(tmp_path):
    service = ServiceProcess(tmp_path, bootstrap_admin_key=ADMIN_KEY, launcher="true", records_flush_seconds="0.3")
    service.start()
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:
            document = yaml.safe_load(EXAMPLE_POLICY)
            document["application_environments"][0] |= {"start_command": ECHO, "server_limits": {"min": 3, "max": 3}}
            installed = await http.put("/v1/policy", headers={**ADMIN, "Content-Type": "application/json"}, content=json.dumps(document))
            assert installed.status_code == 200, installed.text
            await http.post("/v1/principals", headers=ADMIN, json={"name": "qm", "roles": ["queue_manager"]})
            qm = {"Authorization": f"Bearer {(await http.post('/v1/api-keys', headers=ADMIN, json={'principal': 'qm'})).json()['key']}"}
            connected = await http.post(
                "/v1/connections", headers=qm, json={"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}
            )
            qm_token = connected.json()["token"]
            accepted: dict[str, str] = {}
            for userid, count in REQUESTS.items():
                for i in range(count):
                    body = {
                        "connect_token": qm_token,
                        "application_environment": "PAYROLL",
                        "classification": {"userid": userid},
                        "payload": {"delay_ms": i % 7},
                    }
                    answer = await http.post("/v1/work", headers=qm, json=body)
                    assert answer.status_code == 201, answer.text
                    accepted[answer.json()["token"]] = answer.json()["service_class"]

            # Every accepted request ended, and its record is written.
            root = service.dir / "data" / "records"

            def every_record() -> list[dict[str, Any]]:
                rows = records.read(root).to_pylist()
                return rows if len(rows) >= len(accepted) else []

            def shortfall() -> str:
                return f"{records.read(root).num_rows} of {len(accepted)} records:\n{service.log_path.read_text()[-3000:]}"

            ended = await eventually(every_record, 120, what=shortfall, interval=0.3)
            assert {row["token"]: row["service_class"] for row in ended} == accepted
            assert {row["outcome"] for row in ended} == {"completed"}

            # What the test counts itself, per service class period, from the records of the day. (Requests that
            # waited for the launched servers to start may have ended in BATCH's second, discretionary period.)
            day = ended[0]["ended_at"].date()
            responses: dict[tuple[str, int], list[int]] = defaultdict(list)
            for row in ended:
                if row["ended_at"].date() == day:
                    responses[(row["service_class"], row["period"])].append(row["response_time_ms"])

            job = subprocess.run(
                [WLM, "report", "run", "--date", day.isoformat()], env=service.env, capture_output=True, text=True, timeout=240
            )
            assert job.returncode == 0, job.stderr[-3000:]
            # The first run says each stage, and that it writes the class archive; then the summary, and no more.
            log_path = service.dir / "data" / "logs" / f"report-{day.isoformat()}.log"
            stages = [
                re.escape(f"details in {log_path}"),
                r"starting Spark on Java \S+ \(first run: it also writes the JVM's class archive.*\)",
                re.escape(f"reading the work records of {day}"),
                "computing the report",
                "writing the report",
                re.escape("writing the JVM's class archive for the next runs"),
            ]
            assert re.fullmatch("\n".join(rf"\[workload-activity +[\d.]+s\] {stage}" for stage in stages), job.stderr.strip()), job.stderr
            ended_on_day = sum(len(values) for values in responses.values())
            assert re.fullmatch(rf"workload activity report {day}: \d+ rows, {ended_on_day} ended requests, [\d.]+ s", job.stdout.strip())
            assert not DEVELOPER_NOISE.search(job.stdout + job.stderr)
            # The details are in the log: the job's, and the JVM's and Spark's own output.
            log = log_path.read_text()
            assert "WARNING: Using incubator modules" in log and "Using Spark's default log4j profile" in log, log[-3000:]
            # The service's files declare their group keys (the job read the records once) and their outbox
            # positions: nothing was written twice, so no file was searched for copies.
            assert "reading the records" not in log
            assert re.search(r"(\d+) of \1 files share no record with another", log), log[-3000:]
            # The first run wrote the driver JVM's class-data archive, once its JVM had exited.
            assert "class-data archive written" in log
            # Named after the Java the job said it ran on: an ahead-of-time cache on Java 25 and later.
            java = re.search(r"\] Java (.+) at (.+)$", log, re.MULTILINE)
            assert java is not None, log[-3000:]
            assert [path.name for path in (service.dir / "data" / "spark").iterdir()] == [archive_name(Path(java.group(2)))]

            whole_day = (await http.get("/v1/reports/workload", headers=ADMIN, params={"date": day.isoformat(), "interval": 1440})).json()[
                "items"
            ]
            assert {(row["service_class"], row["period"]): row["ended_count"] for row in whole_day} == {
                key: len(values) for key, values in responses.items()
            }
            goal_types = {("ONLINE", 1): "percentile", ("BATCH", 1): "average", ("BATCH", 2): "discretionary"}
            for row in whole_day:
                values = responses[(row["service_class"], row["period"])]
                assert row["response_avg_ms"] == pytest.approx(sum(values) / len(values))
                assert sum(row["buckets"]) == len(values)
                assert row["goal_type"] == goal_types[(row["service_class"], row["period"])]
            intervals = (await http.get("/v1/reports/workload", headers=ADMIN, params={"date": day.isoformat(), "limit": 1000})).json()[
                "items"
            ]
            assert sum(row["ended_count"] for row in intervals) == sum(len(values) for values in responses.values())

            # A rerun replaces the date's rows: nothing doubles.
            again = subprocess.run(
                [WLM, "report", "run", "--date", day.isoformat()], env=service.env, capture_output=True, text=True, timeout=240
            )
            assert again.returncode == 0, again.stderr[-3000:]
            assert "class archive" not in again.stderr
            rerun_log = log_path.read_text()[len(log) :]  # a rerun appends to the date's log
            assert ": mapped" in rerun_log and "class-data archive written" not in rerun_log
            rerun = (await http.get("/v1/reports/workload", headers=ADMIN, params={"date": day.isoformat(), "interval": 1440})).json()[
                "items"
            ]
            assert [(r["service_class"], r["period"], r["ended_count"]) for r in rerun] == [
                (r["service_class"], r["period"], r["ended_count"]) for r in whole_day
            ]
    finally:
        service.stop()
