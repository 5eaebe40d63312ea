"""The dashboard's what-if view end to end: the real service (`wlm serve`) with a recorded day in its data directory,
the what-if job really run by it (PySpark, a child process), and the page in headless Chromium. A candidate too
small for the day's burst runs to its result, which the view shows as the API gives it, flagging the class that
falls; a run is cancelled; a reload follows the run it left; and the refusals (field errors, no records, no Spark)
read as what to do."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from playwright.async_api import Browser, Page, expect

from tests.conftest import ADMIN, ADMIN_KEY, install_policy, make_key
from tests.processes import ServiceProcess
from tests.reports.conftest import watch_errors
from tests.spark_jobs.what_if.records import DAY, RECORDED, as_stored, record, with_limits, write_day

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(600)]

# Last week's version, with one server: too few for the day's burst of twenty ONLINE requests, recorded as served at
# once under it (its version 1 classified them).
LEAN = with_limits(RECORDED, min=1, max=1) | {"name": "LEAN"}
SPARK = {"spark_master": "local[2]", "spark_driver_memory": "1g", "spark_class_archive": "false"}
STATE = "#whatif-state"


def _recorded_day(data_dir: Path) -> None:
    """PAYROLL's day: twenty ONLINE requests of 400 ms at once, each served at once, and a BATCH one."""
    stored = [as_stored(record("ONLINE", 60.0, 400), f"P~{i}") for i in range(20)]
    stored.append(as_stored(record("BATCH", 120.0, 2000, userid="CLERK"), "P~batch"))
    write_day(data_dir / "records", stored)


def _service(tmp_path: Path, **settings: str) -> Iterator[ServiceProcess]:
    _recorded_day(tmp_path / "data")
    yield from ServiceProcess.running(tmp_path, bootstrap_admin_key=ADMIN_KEY, **settings)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ServiceProcess]:
    yield from _service(tmp_path, **SPARK)


@pytest.fixture
def without_spark(tmp_path: Path) -> Iterator[ServiceProcess]:
    """The service where the what-if job cannot run: no Java for Spark's driver."""
    yield from _service(tmp_path, **SPARK, spark_java_home=str(tmp_path / "no-java-here"))


def _admin(service: ServiceProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=service.url, headers=ADMIN, timeout=30)


async def _operator(service: ServiceProcess, *definitions: dict[str, Any]) -> str:
    """`definitions` installed in turn (the last active), and an operator's key."""
    async with _admin(service) as http:
        for definition in definitions:
            await install_policy(http, yaml.safe_dump(definition))
        headers = await make_key(http, "planner", ["operator"])
    return headers["Authorization"].removeprefix("Bearer ")


async def _sign_in(page: Page, service: ServiceProcess, key: str) -> None:
    await page.goto(f"{service.url}/dashboard")
    await page.fill("#api-key", key)
    await page.click("#key-form button[type=submit]")
    await expect(page.locator("#status")).to_have_text("signed in as planner")


def _cells(item: dict[str, Any]) -> list[str]:
    """A summary item of the result as the view's row shows it."""

    def figure(value: float | None, digits: int) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    def share(value: float | None) -> str:
        return "–" if value is None else f"{100 * value:.1f} %"

    sides = ("predicted", "actual")
    return [
        "PAYROLL",
        item["service_class"],
        str(item["period"]),
        *(figure(item[f"{side}_pi"], 2) for side in sides),
        *(share(item[f"{side}_attainment"]) for side in sides),
        *(figure(item[f"{side}_servers"], 1) for side in sides),
        *(figure(item[f"{side}_server_seconds"], 0) for side in sides),
        "falls" if item["falls"] else "",
    ]


async def test_a_candidate_runs_to_its_result_with_the_class_that_falls_flagged(browser: Browser, service: ServiceProcess) -> None:
    key = await _operator(service, LEAN, RECORDED)
    page = await browser.new_page(viewport={"width": 1400, "height": 1100})
    errors = watch_errors(page)
    await _sign_in(page, service, key)

    # The day offered is the recorded one; the candidates, the active policy, the older version, or one pasted.
    await expect(page.locator("#whatif-date")).to_have_value(DAY.isoformat())
    assert await page.locator("#whatif-days option").evaluate_all("options => options.map(o => o.value)") == [DAY.isoformat()]
    await expect(page.locator("#whatif-candidate option")).to_have_text(
        ["the active policy (v2 RECORDED)", re.compile(r"^v1 LEAN, installed \d{4}-\d\d-\d\d by admin$"), re.compile("pasted")]
    )
    await expect(page.locator("#whatif-pasted")).to_be_hidden()

    # A run under way can be cancelled: its state says so, and the view can start another.
    await page.click("#whatif-start")
    await expect(page.locator(STATE)).to_have_attribute("data-state", re.compile("queued|running"))
    await page.click("#whatif-cancel")
    await expect(page.locator(STATE)).to_have_attribute("data-state", "cancelled")
    await expect(page.locator("#whatif-cancel")).to_be_hidden()
    await expect(page.locator("#whatif-start")).to_be_enabled()

    # Last week's version: the run's progress while it runs, followed again after a reload.
    await page.select_option("#whatif-candidate", "version:1")
    await page.click("#whatif-start")
    await expect(page.locator(STATE)).to_have_attribute("data-state", "running", timeout=120_000)
    await expect(page.locator(STATE)).to_contain_text(re.compile(r"running for \d+ s: \S"))
    run_id = int(re.findall(r"What-if run (\d+)", await page.locator(STATE).inner_text())[0])
    await page.reload()
    await expect(page.locator(STATE)).to_contain_text(f"What-if run {run_id} of {DAY.isoformat()}")
    await expect(page.locator(STATE)).to_have_attribute("data-state", "done", timeout=300_000)

    # The result as the API gives it: each class period's row, ONLINE flagged as the result flags it.
    async with _admin(service) as http:
        result = (await http.get(f"/v1/reports/what-if/{run_id}")).json()["result"]
    [payroll] = result["environments"]
    summary = {(item["service_class"], item["period"]): item for item in payroll["summary"]}
    assert summary[("ONLINE", 1)]["falls"] and not summary[("BATCH", 1)]["falls"]
    await expect(page.locator("#whatif-verdict")).to_have_text(
        "Under LEAN, 1 class period would meet the goal in fewer intervals than recorded: PAYROLL ONLINE period 1."
    )
    for (service_class, period), item in summary.items():
        line = page.locator(f'#whatif-summary tr[data-service-class="{service_class}"][data-period="{period}"]')
        await expect(line.locator("td")).to_have_text(_cells(item))
    await expect(page.locator("#whatif-summary tr[data-falls]")).to_have_count(1)
    assert await page.locator('#whatif-summary tr[data-falls] td[class~="falls"]').count() == 1
    online = page.locator('#whatif-summary tr[data-service-class="ONLINE"] td')
    assert await online.nth(3).get_attribute("class") == "number pi missed"  # predicted
    assert await online.nth(4).get_attribute("class") == "number pi met"  # recorded

    # ONLINE's PI across the day: the replay's intervals and the recorded day's, with their figures.
    for side, figures in (("predicted", "predicted"), ("recorded", "actual")):
        rows = [r for r in payroll[figures]["classes"] if r["service_class"] == "ONLINE" and r["interval_minutes"] == 15]
        rows = [r for r in rows if r["performance_index"] is not None]  # an interval that ended nothing has no PI
        points = page.locator(f'#whatif-pi-chart circle.point[data-service-class="ONLINE"][data-side="{side}"]')
        await expect(points).to_have_count(len(rows))
        assert await points.evaluate_all("marks => marks.map(m => Number(m.dataset.value))") == [r["performance_index"] for r in rows]
    assert await page.locator("#whatif-pi-chart path.line.dashed").count() == len(summary)
    await expect(page.locator("#whatif-pi-chart .legend li")).to_have_text(["BATCH period 1", "ONLINE period 1"])
    await expect(page.locator("#whatif-assumptions li")).to_have_count(len(result["assumptions"]))
    assert errors == []


async def test_refusals_read_as_what_to_do(browser: Browser, without_spark: ServiceProcess) -> None:
    key = await _operator(without_spark, RECORDED)
    page = await browser.new_page(viewport={"width": 1400, "height": 1100})
    # Each refusal below is on purpose: the browser logs it as a failed fetch.
    errors = watch_errors(page, [(f"status of {status}", "/v1/reports/what-if") for status in (422, 404, 503)])
    await _sign_in(page, without_spark, key)
    message, fields = page.locator("#whatif-error p"), page.locator("#whatif-error li")

    # A pasted candidate the policy install would refuse: each field at fault.
    await page.select_option("#whatif-candidate", "pasted")
    broken = with_limits(RECORDED, min=3, max=2)
    broken["service_classes"][0].pop("importance")
    await page.fill("#whatif-pasted", yaml.safe_dump(broken))
    await page.click("#whatif-start")
    await expect(message).to_have_text(re.compile(r"^The what-if was refused: these fields are not valid .*nothing ran\.$"))
    await expect(fields).to_have_text(
        [
            "service_classes[0].importance: a average goal needs an importance (1-5)",
            "application_environments[0].server_limits.min: min (3) exceeds max (2)",
        ]
    )

    # A day without records.
    await page.select_option("#whatif-candidate", "active")
    next_day = (DAY + timedelta(days=1)).isoformat()
    await page.fill("#whatif-date", next_day)
    await page.click("#whatif-start")
    no_records = f"The what-if was refused: there are no work records of {next_day}, so nothing to replay; pick a recorded day."
    await expect(message).to_have_text(no_records)
    await expect(fields).to_have_count(0)

    # The recorded day, where Spark cannot run.
    await page.fill("#whatif-date", DAY.isoformat())
    await page.click("#whatif-start")
    await expect(message).to_contain_text("The what-if was refused: Spark is not available where the service runs (")
    await expect(message).to_contain_text("no Java to run Spark's driver on")
    await expect(page.locator(STATE)).to_have_text("")  # nothing ran
    assert errors == []
