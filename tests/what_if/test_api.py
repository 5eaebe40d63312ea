"""The what-if API end to end, on the service in this process and its real child jobs (PySpark): 202 and the run's
progress to its result, one run at a time (a second waits queued), cancel (its process ended), a run whose process
died failed, and the refusals before any Spark work: 422 with the policy install's field errors, 404 no_records,
503 spark_unavailable, operators only; and the days there are records of."""

from __future__ import annotations

import json
import os
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.config import Settings
from app.processes import process_alive
from app.what_if.models import WhatIfRun
from tests.conftest import ADMIN, client_of, install_policy, make_key, running_app
from tests.spark_jobs.what_if.records import DAY, RECORDED, as_stored, record, with_limits, write_day
from tests.waiting import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(600)]
URL = "/v1/reports/what-if"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A small driver, and no class archive to write: each run is a JVM of its own."""
    return settings.model_copy(update={"spark_driver_memory": "1g", "spark_class_archive": False, "spark_master": "local[2]"})


async def operator_of(client: httpx.AsyncClient) -> dict[str, str]:
    await install_policy(client, json.dumps(RECORDED), "application/json")
    return await make_key(client, "planner", ["operator"])


def recorded_day(settings: Settings) -> None:
    stored = [as_stored(record("ONLINE", 60.0, 400), f"P~{i}") for i in range(20)]
    write_day(settings.records_dir, stored)


def body(**fields: Any) -> dict[str, Any]:
    return {"date": DAY.isoformat(), "policy": json.dumps(with_limits(RECORDED, min=1, max=1))} | fields


async def run_of(client: httpx.AsyncClient, headers: dict[str, str], run_id: int) -> dict[str, Any]:
    answer = await client.get(f"{URL}/{run_id}", headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def pid_of(app: FastAPI, run_id: int) -> int | None:
    """The run's process, as the runner recorded it."""
    async with app.state.wlm.sessions() as session:
        run = await session.get(WhatIfRun, run_id)
        return run.pid if run is not None else None


async def test_refusals_before_any_spark_work(client: httpx.AsyncClient, settings: Settings) -> None:
    operator = await operator_of(client)
    broken = with_limits(RECORDED, min=3, max=2)
    refused = await client.post(URL, headers=operator, json=body(policy=broken))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["errors"] == [
        {"path": "application_environments[0].server_limits.min", "message": "min (3) exceeds max (2)"}
    ]
    too_long = with_limits(RECORDED, min=1, max=1)
    too_long["application_environments"][0]["completion_time_ms"] = settings.longest_completion_ms + 1
    refused = await client.post(URL, headers=operator, json=body(policy=too_long))
    assert refused.status_code == 422, refused.text
    assert [e["path"] for e in refused.json()["error"]["errors"]] == ["application_environments[0].completion_time_ms"]
    malformed = await client.post(URL, headers=operator, json=body(policy="name: [unclosed"))
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "malformed_document"
    too_large = await client.post(URL, headers=operator, json=body(policy="#" * (settings.max_policy_bytes + 1)))
    assert too_large.status_code == 413

    missing = await client.post(URL, headers=operator, json=body())
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "no_records"

    viewer = await make_key(client, "looker", ["viewer"])
    assert (await client.post(URL, headers=viewer, json=body())).status_code == 403
    assert not (settings.data_dir / "what-if").exists()


async def test_the_days_to_replay_are_those_with_records(client: httpx.AsyncClient, settings: Settings) -> None:
    operator = await operator_of(client)
    assert (await client.get(f"{URL}/dates", headers=operator)).json() == {"items": []}
    recorded_day(settings)
    # A request that ended the next day is in that day's records; a partition without a records file is no day.
    write_day(settings.records_dir, [as_stored(record("ONLINE", 86_400 + 60.0, 400), "P~next")])
    (settings.records_dir / "date=2026-11-18").mkdir()
    next_day = (DAY + timedelta(days=1)).isoformat()
    assert (await client.get(f"{URL}/dates", headers=operator)).json() == {"items": [next_day, DAY.isoformat()]}
    assert (await client.get(f"{URL}/dates", headers=operator, params={"limit": 1})).json() == {"items": [next_day]}
    viewer = await make_key(client, "looker", ["viewer"])
    assert (await client.get(f"{URL}/dates", headers=viewer)).status_code == 403


async def test_without_java_the_api_answers_503(settings: Settings, tmp_path: Path) -> None:
    recorded_day(settings)
    without_java = settings.model_copy(update={"spark_java_home": tmp_path / "no-java-here"})
    async with running_app(without_java) as application, client_of(application) as client:
        operator = await operator_of(client)
        refused = await client.post(URL, headers=operator, json=body())
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "spark_unavailable"


async def test_runs_one_at_a_time_with_progress_cancel_and_result(app: FastAPI, client: httpx.AsyncClient, settings: Settings) -> None:
    recorded_day(settings)
    operator = await operator_of(client)
    first = await client.post(URL, headers=operator, json=body())
    assert first.status_code == 202, first.text
    second = await client.post(URL, headers=operator, json=body(seed=4))
    assert second.status_code == 202
    first_id, second_id = first.json()["id"], second.json()["id"]

    async def running_with_progress() -> dict[str, Any] | None:
        run = await run_of(client, operator, first_id)
        return run if run["state"] == "running" and run["progress"] not in (None, "starting") else None

    running = await eventually(running_with_progress, 120, what="the first run running, with its progress")
    assert (await run_of(client, operator, second_id))["state"] == "queued"  # one at a time

    # Cancel the first: its process is ended, and the second runs.
    cancelled = await client.delete(f"{URL}/{first_id}", headers=operator)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    pid = await pid_of(app, first_id)
    assert pid is not None
    await eventually(lambda: not process_alive(pid), 30, what="the cancelled run's process ended")
    assert running["requested_by"] == "planner"

    async def finished() -> dict[str, Any] | None:
        run = await run_of(client, operator, second_id)
        return run if run["state"] in ("done", "failed") else None

    done = await eventually(finished, 300, what="the second run finished", interval=1)
    assert done["state"] == "done", done["error"]
    assert done["progress"] is None and done["seed"] == 4
    [payroll] = done["result"]["environments"]
    [online] = [item for item in payroll["summary"] if item["service_class"] == "ONLINE"]
    assert online["falls"]  # one server for a burst of twenty
    assert (await run_of(client, operator, first_id))["state"] == "cancelled"
    again = await client.delete(f"{URL}/{second_id}", headers=operator)
    assert again.status_code == 409 and again.json()["error"]["code"] == "run_finished"
    assert (await client.get(f"{URL}/999999", headers=operator)).status_code == 404
    assert (await client.get(f"{URL}/{second_id}", headers=ADMIN)).status_code == 200  # admin implies operator


async def test_a_run_whose_process_dies_is_failed(app: FastAPI, client: httpx.AsyncClient, settings: Settings) -> None:
    recorded_day(settings)
    operator = await operator_of(client)
    run_id = (await client.post(URL, headers=operator, json=body())).json()["id"]

    pid = await eventually(lambda: pid_of(app, run_id), 60, what="the run's process started")
    os.killpg(pid, signal.SIGKILL)

    async def failed() -> dict[str, Any] | None:
        run = await run_of(client, operator, run_id)
        return run if run["state"] == "failed" else None

    run = await eventually(failed, 60, what="the run failed")
    assert run["error"]


async def test_one_run_at_a_time_across_replicas(
    app: FastAPI, client: httpx.AsyncClient, other: httpx.AsyncClient, settings: Settings
) -> None:
    """A run asked of another replica waits while one runs; that replica can cancel the one running (its process is
    on this host), and the next runs."""
    recorded_day(settings)
    operator = await operator_of(client)
    first_id = (await client.post(URL, headers=operator, json=body())).json()["id"]
    await eventually(lambda: pid_of(app, first_id), 60, what="the first run's job started")

    async def state_of(run_id: int) -> str:
        return (await run_of(other, operator, run_id))["state"]  # type: ignore[no-any-return]

    second_id = (await other.post(URL, headers=operator, json=body(seed=1))).json()["id"]
    assert await state_of(first_id) == "running" and await state_of(second_id) == "queued"

    pid = await pid_of(app, first_id)
    assert pid is not None
    assert (await other.delete(f"{URL}/{first_id}", headers=operator)).json()["state"] == "cancelled"
    await eventually(lambda: not process_alive(pid), 30, what="the cancelled run's process ended")

    async def second_running() -> bool:
        return await state_of(second_id) == "running"

    await eventually(second_running, 60, what="the queued run running")
    # A queued run cancelled never runs.
    third_id = (await client.post(URL, headers=operator, json=body(seed=2))).json()["id"]
    assert await state_of(third_id) == "queued"
    assert (await other.delete(f"{URL}/{third_id}", headers=operator)).json()["state"] == "cancelled"
    assert (await client.delete(f"{URL}/{second_id}", headers=operator)).json()["state"] == "cancelled"
    assert (await client.delete(f"{URL}/{second_id}", headers=operator)).json()["state"] == "cancelled"  # again: as it is
    third = await run_of(client, operator, third_id)
    assert third["state"] == "cancelled" and third["started_at"] is None
