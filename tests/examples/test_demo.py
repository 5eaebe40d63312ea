"""`wlm demo` end to end: a real service (`wlm serve` with its launcher, as `make run` starts it, but judging goals
every half second over a 6 s window so that a demo of short phases moves the manager), the demo as a user runs it in a
second terminal (no key given: it reads data/admin.key), and the dashboard in headless Chromium watching it. The
dashboard's picture mid-demo is written to docs/dashboard-demo.png, the README's screenshot."""

from __future__ import annotations

import asyncio
import io
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from playwright.async_api import ConsoleMessage, async_playwright, expect

from app.examples.demo_plan import CLASS_NAMES
from app.work import records
from tests.processes import WLM, ServiceProcess
from tests.reports.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.waiting import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300)]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard-demo.png"
VIEWPORT = {"width": 1280, "height": 900}
# Four phases: a surge of REPORTS, a surge of ONLINE (QUIESCE and RESUME at its end), steady work, REPORTS again.
PHASE_SECONDS = 12
MINUTES = 4 * PHASE_SECONDS / 60
DEMO_TIMEOUT_S = 240.0
SUMMARY_REQUESTS = re.compile(r"requests: (\d+) queued .*?, (\d+) ended, (\d+) purged when the demo left, (\d+) still in flight")
SUMMARY_SERVERS = re.compile(r"servers: (\d+) started by the launcher, (\d+) retired as surplus \(0C14\)")


@dataclass
class DemoRun:
    service: ServiceProcess
    admin: httpx.AsyncClient
    process: asyncio.subprocess.Process
    output: Path

    def printed(self) -> str:
        return self.output.read_text()


@pytest.fixture(scope="module")
async def demo(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DemoRun]:
    """The service, and `wlm demo` started against it (running while the tests watch it)."""
    directory = tmp_path_factory.mktemp("demo")
    service = ServiceProcess(
        directory, launcher="true", goal_interval_seconds="0.5", goal_window_seconds="6", lease_check_seconds="0.2", log_level="info"
    )
    service.start()
    admin_key = (directory / "data" / "admin.key").read_text().strip()
    output = directory / "demo.out"
    with output.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            WLM, "demo", "--minutes", f"{MINUTES:.4f}", "--phase-seconds", str(PHASE_SECONDS),
            cwd=directory, env=service.env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    admin = httpx.AsyncClient(base_url=service.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=10)
    try:
        yield DemoRun(service, admin, process, output)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)  # Ctrl-C: it disconnects its queue manager and revokes its key
            await asyncio.wait_for(process.wait(), 30)
        await admin.aclose()
        service.stop()


async def _viewer_key(admin: httpx.AsyncClient) -> str:
    assert (await admin.post("/v1/principals", json={"name": "wall-screen", "roles": ["viewer"]})).status_code == 201
    created = await admin.post("/v1/api-keys", json={"principal": "wall-screen"})
    assert created.status_code == 201, created.text
    return str(created.json()["key"])


def _not_white(png: bytes) -> int:
    return sum(1 for pixel in Image.open(io.BytesIO(png)).convert("L").tobytes() if pixel < 240)


async def test_the_dashboard_mid_demo_shows_pis_servers_and_queues_moving(demo: DemoRun) -> None:
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)"
    viewer_key = await _viewer_key(demo.admin)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport=VIEWPORT)
        script_errors: list[str] = []
        page.on("pageerror", lambda error: script_errors.append(str(error)))

        def console_error(message: ConsoleMessage) -> None:
            if message.type == "error":
                script_errors.append(f"{message.text} ({message.location.get('url', '')})")

        page.on("console", console_error)
        # Until the demo installs its policy, GET /v1/policy answers 404 (which the dashboard shows as "no policy", but
        # the browser logs as an error): sign in once it is there.
        await eventually(lambda: _policy_active(demo), DEMO_TIMEOUT_S, what="the demo's policy", interval=0.2)
        # Refreshed every second, so that the trends of a short demo have enough samples to draw.
        await page.goto(f"{demo.service.url}/dashboard?refresh=1")
        await page.fill("#api-key", viewer_key)
        await page.click("#key-form button[type=submit]")
        await expect(page.locator("#status")).to_have_text("signed in as wall-screen")

        # Mid-demo: past the QUIESCE and RESUME, in the last phase.
        await eventually(lambda: _printed(demo, "phase 4/4"), DEMO_TIMEOUT_S, what="the demo's last phase", interval=0.2)

        payroll = page.locator('#environments tr[data-environment="PAYROLL"] td')
        await expect(payroll.nth(1)).to_have_text("AVAILABLE")
        await expect(payroll.nth(2)).to_have_text(re.compile(r"^[1-9]\d*$"))  # servers connected
        await expect(payroll.nth(3)).to_contain_text(re.compile(r"ONLINE \d+/\d+"))  # connected/wanted per class
        await expect(payroll.nth(6)).to_contain_text(re.compile(r"ONLINE \d+\.\d\d"))  # PI per class
        assert await page.locator("[data-start-error]").count() == 0  # no server failed to start
        # The trends: a line per class in each chart, PIs known, servers wanted beyond one, a queue that rose.
        for chart in ("#trend-pi", "#trend-servers", "#trend-queued"):
            for service_class in ("ONLINE", "BATCH", "REPORTS"):
                assert await page.locator(f'{chart} circle.point[data-service-class="{service_class}"]').count() > 10, (
                    chart,
                    service_class,
                )
        assert max(await _values(page, '#trend-pi circle.point[data-service-class="REPORTS"]')) > 0
        assert max(await _values(page, "#trend-servers .series:has(path.dashed) circle.point")) >= 2
        assert max(await _values(page, "#trend-queued circle.point")) > 0
        await expect(page.locator('#performance tr[data-service-class="ONLINE"] td').nth(5)).to_have_text(re.compile(r"\d\.\d\d"))

        png = await page.screenshot(path=SCREENSHOT)
        assert script_errors == []
        await browser.close()
    assert Image.open(io.BytesIO(png)).size == (VIEWPORT["width"], VIEWPORT["height"])
    assert _not_white(png) > VIEWPORT["width"] * VIEWPORT["height"] // 20, "the screenshot is mostly blank"
    assert len(png) < 400_000  # small enough to keep in the repository


async def _policy_active(demo: DemoRun) -> bool:
    return (await demo.admin.get("/v1/policy")).status_code == 200


async def _printed(demo: DemoRun, text: str) -> bool:
    assert demo.process.returncode in (None, 0), demo.printed()
    return text in demo.printed()


async def _values(page: Any, selector: str) -> list[float]:
    return await page.locator(selector).evaluate_all("marks => marks.map(m => Number(m.dataset.value))")  # type: ignore[no-any-return]


async def test_the_demo_starts_and_retires_servers_quiesces_and_resumes_and_serves_all_it_queued(demo: DemoRun) -> None:
    code = await asyncio.wait_for(demo.process.wait(), DEMO_TIMEOUT_S)
    printed = demo.printed()
    assert code == 0, printed
    queued, ended, purged, in_flight = (int(n) for n in SUMMARY_REQUESTS.search(printed).groups())  # type: ignore[union-attr]
    started, retired = (int(n) for n in SUMMARY_SERVERS.search(printed).groups())  # type: ignore[union-attr]
    assert started >= 2 and retired >= 1, printed

    # The servers' own logs agree: each launched server logs to data/servers/, and a retired one logs its 0C14.
    logs = [path.read_text() for path in (demo.service.dir / "data" / "servers").glob("PAYROLL-*.log")]
    assert len(logs) >= started
    surplus = [log for log in logs if any("(0C14)" in line and "QUIESC" not in line for line in log.splitlines())]
    assert len(surplus) >= 1, printed

    # The QUIESCE and the RESUME, in that order, in the operator commands' audit.
    commands = (await demo.admin.get("/v1/operator/commands")).json()["items"]
    accepted = [c["command"] for c in reversed(commands) if c["result"] == "accepted"]
    assert accepted == ["VARY WLM,APPLENV=PAYROLL,QUIESCE", "VARY WLM,APPLENV=PAYROLL,RESUME"]

    # Every request it queued has its work record: ended (completed), or purged when it left.
    connections = (await demo.admin.get("/v1/connections", params={"role": "queue_manager"})).json()["items"]
    (queue_manager,) = [c for c in connections if c["subsystem_name"] == "DEMO"]
    assert queue_manager["state"] == "disconnected"
    assert queued > 0 and ended + purged + in_flight == queued and in_flight == 0

    async def outcomes() -> dict[str, int] | None:
        table = await asyncio.to_thread(records.read, demo.service.dir / "data" / "records")
        mine = [row["outcome"] for row in table.to_pylist() if row["queue_manager_id"] == queue_manager["id"]]
        return {outcome: mine.count(outcome) for outcome in set(mine)} if len(mine) >= queued else None

    assert await eventually(outcomes, 30, what="the demo's work records", interval=0.2) == {"completed": ended} | (
        {"purged": purged} if purged else {}
    )

    # Why each class missed its goal, from the live delay samples: every class named, each miss with its span and cause.
    misses = printed.split("misses by cause", 1)[1].splitlines()[1:4]
    assert [line.split()[0] for line in misses] == list(CLASS_NAMES), printed
    spans = [span for line in misses if " missed " in line for span in line.split(" missed ", 1)[1].split(", ")]
    assert all(re.fullmatch(r"\d+:\d\d-\d+:\d\d .+", span) for span in spans), printed

    # Its queue manager's key was revoked as it left.
    keys = (await demo.admin.get("/v1/api-keys")).json()["items"]
    assert [k["revoked_at"] is not None for k in keys if k["principal"] == "wlm-demo"] == [True]
