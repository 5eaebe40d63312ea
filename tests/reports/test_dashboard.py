"""The dashboard end to end: the real service (`wlm serve`), live work through it, report rows in its database, and
the page in real headless Chromium (Debian's, installed by `make test`), driven by Playwright's client. The charts
are checked as SVG (marks and the values they carry) and as pixels (screenshots that are not blank)."""

from __future__ import annotations

import io
import re
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from PIL import Image
from playwright.async_api import Page, expect

from app.db import create_engine, session_factory
from app.reports.models import WorkloadReportRow
from spark_jobs.contract.goals import BUCKET_LABELS
from tests.conftest import ADMIN, ADMIN_KEY, EXAMPLE_POLICY
from tests.processes import ServiceProcess
from tests.reports.conftest import DAY, report_row, spread, store_rows, watch_errors
from tests.work.conftest import grouped_policy

pytestmark = pytest.mark.asyncio

ONLINE_WORK = {"userid": "ATM01"}  # classified to ONLINE by the example policy
LIVE_ENDED = 4
LIVE_QUEUED = 3
EARLIER_DAY = DAY - timedelta(days=1)
# The series colours of the charts (charts.js PALETTE) and the bars within and beyond the goal (dashboard.css).
FIRST_SERIES_RGB = (0x00, 0x72, 0xB2)
SECOND_SERIES_RGB = (0xE6, 0x9F, 0x00)
WITHIN_GOAL_RGB = (0x1A, 0x7F, 0x37)
BEYOND_GOAL_RGB = (0xC6, 0x28, 0x28)


def _online_slots() -> dict[int, list[int]]:
    """ONLINE's 15-minute intervals of DAY: slot -> buckets. Two missed the goal; slot 5 ended nothing and slots 40-59
    have no row (gaps in its line)."""
    slots = {slot: spread(9, 1) for slot in [*range(0, 40), *range(60, 64)]}
    slots.update({12: spread(5, 5), 30: spread(2, 8), 5: [0] * len(BUCKET_LABELS)})
    return slots


def _report() -> list[WorkloadReportRow]:
    online = [report_row(slot, buckets=buckets) for slot, buckets in _online_slots().items()]
    batch = [report_row(slot, service_class="BATCH", performance_index=0.4 + slot / 100) for slot in range(10, 22)]
    whole_day = [report_row(None, buckets=[3, 4, 5, 9, 2, 1, 1, 0, 2, 0, 0, 3, 1, 1]), report_row(None, service_class="BATCH")]
    earlier = [report_row(slot, day=EARLIER_DAY) for slot in (8, 9)] + [report_row(None, day=EARLIER_DAY)]
    return online + batch + whole_day + earlier


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ServiceProcess]:
    yield from ServiceProcess.running(tmp_path, bootstrap_admin_key=ADMIN_KEY, goal_interval_seconds="0.5")


@pytest.fixture
async def http(service: ServiceProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.url, headers=ADMIN, timeout=30) as client:
        yield client


async def _post(http: httpx.AsyncClient, path: str, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = await http.post(path, json=body, headers=headers)
    assert response.status_code in (200, 201), response.text
    return response.json()  # type: ignore[no-any-return]


async def _key(http: httpx.AsyncClient, name: str, role: str, permits: Sequence[str] = ()) -> str:
    await _post(http, "/v1/principals", {"name": name, "roles": [role], "permits": list(permits)})
    return str((await _post(http, "/v1/api-keys", {"principal": name}))["key"])


async def _live_state(http: httpx.AsyncClient) -> None:
    """The example policy, a queue manager and a server on PAYROLL: LIVE_ENDED ONLINE requests served and ended (so
    the goal evaluation has a PI for ONLINE) and LIVE_QUEUED left waiting."""
    response = await http.put("/v1/policy", content=EXAMPLE_POLICY, headers={"Content-Type": "application/yaml"})
    assert response.status_code == 200, response.text
    qm = {"Authorization": f"Bearer {await _key(http, 'bank', 'queue_manager')}"}
    srv = {"Authorization": f"Bearer {await _key(http, 'payroll-servers', 'server', ['CB.*.PAYROLL'])}"}
    qm_token = (await _post(http, "/v1/connections", {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}, qm))[
        "token"
    ]
    server = {
        "role": "server",
        "subsystem_type": "CB",
        "subsystem_name": "BANK1",
        "application_environment": "PAYROLL",
        "worker_tasks": LIVE_ENDED,
    }
    server_token = (await _post(http, "/v1/connections", server, srv))["token"]
    work = {"connect_token": qm_token, "application_environment": "PAYROLL", "classification": ONLINE_WORK, "payload": {}}
    for _ in range(LIVE_ENDED):
        await _post(http, "/v1/work", work, qm)
    items = (await _post(http, "/v1/work/select", {"connect_token": server_token, "max_items": LIVE_ENDED, "begin": True}, srv))["items"]
    assert len(items) == LIVE_ENDED
    # Ended by the server's next select, which finds nothing queued; the requests queued after it wait.
    ended = await http.post(
        "/v1/work/select", json={"connect_token": server_token, "end": [{"token": i["token"]} for i in items]}, headers=srv
    )
    assert ended.status_code in (200, 204), ended.text
    for _ in range(LIVE_QUEUED):
        await _post(http, "/v1/work", work, qm)


async def _store_report(service: ServiceProcess) -> None:
    engine = create_engine(f"sqlite:///{service.dir / 'data' / 'wlm.db'}")
    try:
        await store_rows(session_factory(engine), _report())
    finally:
        await engine.dispose()


def _pixels(png: bytes) -> list[tuple[int, ...]]:
    rgb = Image.open(io.BytesIO(png)).convert("RGB").tobytes()
    return [tuple(rgb[i : i + 3]) for i in range(0, len(rgb), 3)]


def _pixels_near(png: bytes, rgb: tuple[int, int, int], tolerance: int = 24) -> int:
    return sum(1 for pixel in _pixels(png) if all(abs(a - b) <= tolerance for a, b in zip(pixel, rgb, strict=True)))


def _not_background(png: bytes) -> int:
    return sum(1 for pixel in _pixels(png) if pixel != (255, 255, 255))


async def _values(page: Page, selector: str, attribute: str) -> list[float]:
    return await page.locator(selector).evaluate_all(f"marks => marks.map(m => Number(m.getAttribute('{attribute}')))")  # type: ignore[no-any-return]


async def test_dashboard_shows_live_state_and_the_report_as_charts(browser, service, http):
    await _live_state(http)
    await _store_report(service)
    viewer_key = await _key(http, "wall-screen", "viewer")

    page = await browser.new_page(viewport={"width": 1400, "height": 1100})
    script_errors = watch_errors(page, expected=[("status of 401", "/v1/whoami")])  # the wrong key below, on purpose
    response = await page.goto(f"{service.url}/dashboard")
    assert response is not None and response.status == 200  # the page itself needs no key

    # The key: asked for once, a wrong one refused, the right one kept in this tab's sessionStorage, never in the URL.
    await expect(page.locator("#key-form")).to_be_visible()
    await page.fill("#api-key", "wlm_not-a-key")
    await page.click("#key-form button[type=submit]")
    await expect(page.locator("#key-error")).to_contain_text("not accepted")
    await page.fill("#api-key", viewer_key)
    await page.click("#key-form button[type=submit]")
    await expect(page.locator("#status")).to_have_text("signed in as wall-screen")
    assert await page.evaluate("sessionStorage.getItem('wlm.apiKey')") == viewer_key
    assert viewer_key not in page.url
    await page.reload()
    await expect(page.locator("#content")).to_be_visible()
    await expect(page.locator("#key-form")).to_be_hidden()

    # Live: the environment with its state, server and queue, and ONLINE's PI from the goal evaluation.
    payroll = page.locator('#environments tr[data-environment="PAYROLL"] td')
    await expect(payroll.nth(0)).to_have_text("PAYROLL")
    await expect(payroll.nth(1)).to_have_text("AVAILABLE")
    await expect(payroll.nth(2)).to_have_text("1")
    await expect(payroll.nth(5)).to_have_text(f"{LIVE_QUEUED} (ONLINE {LIVE_QUEUED})")
    online_live = page.locator('#performance tr[data-service-class="ONLINE"][data-period="1"] td')
    await expect(online_live.nth(4)).to_have_text("90 % within 250 ms")
    await expect(online_live.nth(12)).to_have_text(str(LIVE_QUEUED), timeout=15_000)
    await expect(online_live.nth(13)).to_have_text("0")  # promoted selects: ONLINE, the most important, needs none
    # Beside the PI, the delay samples: a share served, and the waiting shares by cause (or none).
    await expect(online_live.nth(6)).to_have_text(re.compile(r"^\d+ %$"), timeout=15_000)
    await expect(online_live.nth(7)).not_to_have_text("–")
    performance = (await http.get("/v1/service-classes/ONLINE/performance")).json()["periods"][0]
    assert performance["ended"] == LIVE_ENDED
    await expect(online_live.nth(5)).to_have_text(f"{performance['performance_index']:.2f}", timeout=15_000)

    # The what-if view runs only for operators: a viewer's key is told so, and nothing of it is asked.
    await expect(page.locator("#whatif-access")).to_contain_text("What-if runs take an operator's key")
    await expect(page.locator("#whatif-form")).to_be_hidden()

    # Advisories: the scheduler's election (the stream replays the last few, then follows).
    await expect(page.locator('#advisories tr[data-subject^="WLM.INFO.SCHEDULER.ACTIVE."]')).to_have_count(1)
    await expect(page.locator('#advisories tr[data-subject^="WLM.INFO.SCHEDULER.ACTIVE."] td').nth(2)).to_contain_text("epoch=1")

    # The report: the newest date first, PAYROLL on LOCAL; a line per service class period, a PI = 1 line.
    assert [await o.text_content() for o in await page.locator("#report-date option").all()] == [DAY.isoformat(), EARLIER_DAY.isoformat()]
    online = {slot: b for slot, b in _online_slots().items() if sum(b)}  # an interval that ended nothing has no PI
    online_points = '#pi-chart circle.point[data-service-class="ONLINE"]'
    await expect(page.locator(online_points)).to_have_count(len(online))
    assert await _values(page, online_points, "data-minute") == [15 * slot for slot in sorted(online)]
    expected_pis = [report_row(slot, buckets=online[slot]).performance_index for slot in sorted(online)]
    assert await _values(page, online_points, "data-value") == expected_pis
    batch_points = '#pi-chart circle.point[data-service-class="BATCH"]'
    assert await _values(page, batch_points, "data-value") == [0.4 + slot / 100 for slot in range(10, 22)]
    assert await page.locator("#pi-chart line.reference").count() == 1
    assert await page.locator("#pi-chart .series path.line").count() == 2
    await expect(page.locator("#pi-chart .legend li")).to_have_text(["BATCH period 1", "ONLINE period 1"])

    # The distribution of ONLINE's whole day: 14 bars with the counts, the goal between <=100% and <=110%.
    await page.select_option("#report-series", label="ONLINE period 1")
    bars = "#distribution-chart rect.bar"
    await expect(page.locator(bars)).to_have_count(14)
    assert await _values(page, bars, "data-value") == [3, 4, 5, 9, 2, 1, 1, 0, 2, 0, 0, 3, 1, 1]
    assert await page.locator(bars).evaluate_all("bars => bars.map(b => b.dataset.label)") == list(BUCKET_LABELS)
    await expect(page.locator("#distribution-chart .caption")).to_contain_text("goal 90 % within 250 ms; 32 ended")
    await expect(page.locator('#report-summary tr[data-series^="ONLINE|1|"] td').nth(8)).to_have_text("2 of 44")

    # As pixels: both charts are drawn, with their data in the data's colours.
    line_png = await page.locator("#pi-chart svg.chart").screenshot()
    bars_png = await page.locator("#distribution-chart svg.chart").screenshot()
    for png in (line_png, bars_png):
        width, height = Image.open(io.BytesIO(png)).size
        assert width > 400 and height > 150
        assert _not_background(png) > width * height // 50, "the chart is blank"
    assert _pixels_near(line_png, FIRST_SERIES_RGB) > 80 and _pixels_near(line_png, SECOND_SERIES_RGB) > 200  # BATCH, ONLINE
    assert _pixels_near(bars_png, WITHIN_GOAL_RGB) > 5000 and _pixels_near(bars_png, BEYOND_GOAL_RGB) > 1500

    # Another date redraws the charts with its rows.
    await page.select_option("#report-date", EARLIER_DAY.isoformat())
    await expect(page.locator(online_points)).to_have_count(2)
    await expect(page.locator("#pi-chart .series")).to_have_count(1)
    assert script_errors == []


async def test_dashboard_shows_the_launcher_s_last_failed_start_with_the_end_of_its_log(browser, tmp_path):
    service = ServiceProcess(tmp_path, bootstrap_admin_key=ADMIN_KEY, launcher="true", lease_check_seconds="0.2")
    service.start()
    try:
        async with httpx.AsyncClient(base_url=service.url, headers=ADMIN, timeout=30) as http:
            document = yaml.safe_load(EXAMPLE_POLICY)
            failing = [sys.executable, "-c", "import sys; print('cannot reach the ledger', file=sys.stderr); raise SystemExit(3)"]
            document["application_environments"][0]["start_command"] = failing
            installed = await http.put("/v1/policy", json=document)
            assert installed.status_code == 200, installed.text
            qm = {"Authorization": f"Bearer {await _key(http, 'bank', 'queue_manager')}"}
            # The launcher starts servers only while a queue manager of the environment's subsystem is connected.
            await _post(http, "/v1/connections", {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}, qm)
            viewer_key = await _key(http, "wall-screen", "viewer")

            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(f"{service.url}/dashboard?refresh=1")
            await page.fill("#api-key", viewer_key)
            await page.click("#key-form button[type=submit]")
            failure = page.locator('#environments tr[data-start-error="PAYROLL"]')
            await expect(failure).to_contain_text("A server of PAYROLL failed to start", timeout=30_000)
            await expect(failure).to_contain_text("exit status 3")
            await expect(failure.locator("pre")).to_contain_text("cannot reach the ledger")
            # Under its environment's row, across the whole table.
            assert await failure.locator("td").get_attribute("colspan") == "7"
            assert await page.locator('#environments tr[data-environment="PAYROLL"] + tr[data-start-error="PAYROLL"]').count() == 1
    finally:
        service.stop()


async def test_dashboard_lists_dead_letters_and_retries_one_with_an_operator_s_key(browser, service, http):
    grouped = grouped_policy([{"name": "LIMITED", "max_in_flight": 5, "min_in_flight": 1}], ONLINE="LIMITED")
    response = await http.put("/v1/policy", content=grouped, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    qm = {"Authorization": f"Bearer {await _key(http, 'bank', 'queue_manager')}"}
    srv = {"Authorization": f"Bearer {await _key(http, 'payroll-servers', 'server', ['CB.*.PAYROLL'])}"}
    qm_token = (await _post(http, "/v1/connections", {"role": "queue_manager", "subsystem_type": "CB", "subsystem_name": "BANK1"}, qm))[
        "token"
    ]
    server = {"role": "server", "subsystem_type": "CB", "subsystem_name": "BANK1", "application_environment": "PAYROLL", "worker_tasks": 2}
    server_token = (await _post(http, "/v1/connections", server, srv))["token"]
    work = {"connect_token": qm_token, "application_environment": "PAYROLL", "classification": ONLINE_WORK, "payload": {"n": 1}}
    tokens = [(await _post(http, "/v1/work", work, qm))["token"] for _ in range(2)]
    await _post(http, "/v1/work/select", {"connect_token": server_token, "max_items": 2}, srv)
    for token in tokens:
        await _post(
            http,
            f"/v1/work/{token}/end",
            {"connect_token": server_token, "outcome": "failed", "dead_letter": True, "error": "ledger closed"},
            srv,
        )

    page = await browser.new_page(viewport={"width": 1400, "height": 1100})
    viewer_key, operator_key = await _key(http, "wall-screen", "viewer"), await _key(http, "night-shift", "operator")
    await page.goto(f"{service.url}/dashboard?refresh=1")
    await page.fill("#api-key", viewer_key)
    await page.click("#key-form button[type=submit]")
    first = page.locator(f'#dead-letters tr[data-token="{tokens[0]}"]')
    await expect(first.locator("td").nth(3)).to_have_text("ONLINE")
    await expect(first.locator("td").nth(4)).to_have_text("failed")
    await expect(first.locator("td").nth(6)).to_have_text("ledger closed")
    await expect(page.locator("#dead-letters-count")).to_have_text("(2)")
    group = page.locator('#resource-groups tr[data-resource-group="LIMITED"] td')
    await expect(group).to_have_text(["LIMITED", "ONLINE", "0", "5", "1", "0.0 s"])
    # A viewer may look, not act: told why, and the dead letter stays.
    await first.get_by_role("button", name="Retry").click()
    await expect(page.locator("#dead-letters-error")).to_contain_text(f"Could not retry {tokens[0]}")
    await expect(page.locator("#dead-letters tbody tr")).to_have_count(2)

    await page.evaluate(f"sessionStorage.setItem('wlm.apiKey', '{operator_key}')")
    await first.get_by_role("button", name="Retry").click()
    await expect(first).to_have_count(0)
    await page.locator(f'#dead-letters tr[data-token="{tokens[1]}"]').get_by_role("button", name="Discard").click()
    await expect(page.locator("#dead-letters td.empty")).to_have_text("No dead letters.")
    await expect(page.locator('#environments tr[data-environment="PAYROLL"] td').nth(5)).to_have_text("1 (ONLINE 1)")
