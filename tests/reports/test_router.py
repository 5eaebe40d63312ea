"""The report API over HTTP, on the real app and report rows stored in real SQLite and PostgreSQL databases."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.reports.models import WorkloadReportRow
from spark_jobs.contract.goals import BUCKET_LABELS
from tests.conftest import ADMIN, make_key
from tests.reports.conftest import DAY, report_row, spread, store_rows

pytestmark = pytest.mark.asyncio

WORKLOAD = "/v1/reports/workload"


async def rows_of(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await client.get(WORKLOAD, headers=ADMIN, params=params)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def refused(client: httpx.AsyncClient, path: str, params: dict[str, Any], status: int = 422) -> dict[str, Any]:
    response = await client.get(path, headers=ADMIN, params=params)
    assert response.status_code == status, (params, response.text)
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"], body
    return body["error"]  # type: ignore[no-any-return]


def keys_of(page: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(r["report_date"], r["interval_start"][11:16], r["interval_minutes"], r["service_class"], r["period"]) for r in page["items"]]


# The delay columns of ONLINE's interval 2: a third of its states served, the rest waiting for servers to start
# (and a little for none); a failover's gap left 3,000 of the interval's 3,600 samples.
ONLINE_DELAYS = {
    "delay_samples": 3000,
    "using_pct": 30.0,
    "delay_environment_state_pct": 0.0,
    "delay_redelivery_pct": 0.0,
    "delay_group_cap_pct": 0.0,
    "delay_no_server_pct": 0.0,
    "delay_servers_starting_pct": 65.0,
    "delay_busy_higher_pct": 0.0,
    "delay_busy_lower_pct": 0.0,
    "unknown_pct": 5.0,
}


@pytest.fixture
async def day(app: FastAPI) -> None:
    """DAY: ONLINE in intervals 0-2 and BATCH periods 1 and 2 in interval 1, with their whole-day rows; and the
    day after, ONLINE in interval 0. Stored in an order unlike the API's, which must sort them."""
    rows = [
        report_row(2, buckets=spread(5, 5), **ONLINE_DELAYS),  # 90 % reached only at 200 %: PI 2.0
        report_row(1, service_class="BATCH", period=2, goal_type="discretionary", goal_ms=None, importance=5, performance_index=0.81),
        report_row(None, service_class="BATCH", period=1),
        report_row(None, buckets=spread(23, 7)),
        report_row(1),
        report_row(1, service_class="BATCH", period=1, performance_index=1.25),
        report_row(0, day=DAY + timedelta(days=1)),
        report_row(0),
    ]
    await store_rows(app.state.wlm.sessions, rows)


async def test_a_day_in_the_stable_order_with_every_column(client, day):
    page = await rows_of(client, date=DAY.isoformat())
    assert keys_of(page) == [
        ("2026-11-21", "00:00", 15, "ONLINE", 1),
        ("2026-11-21", "00:15", 15, "BATCH", 1),
        ("2026-11-21", "00:15", 15, "BATCH", 2),
        ("2026-11-21", "00:15", 15, "ONLINE", 1),
        ("2026-11-21", "00:30", 15, "ONLINE", 1),
    ]
    assert page["bucket_labels"] == list(BUCKET_LABELS) and len(BUCKET_LABELS) == 14
    assert (page["total"], page["limit"], page["offset"], page["next"]) == (5, 100, 0, None)
    missed = page["items"][-1]
    assert set(missed) == {column.name for column in WorkloadReportRow.__table__.columns}
    assert missed["interval_start"] == "2026-11-21T00:30:00Z"
    assert missed["buckets"] == spread(5, 5) and missed["performance_index"] == 2.0 and missed["goal_met_share"] == 0.5
    assert (missed["goal_type"], missed["goal_ms"], missed["goal_percentile"], missed["importance"]) == ("percentile", 250, 90, 1)
    assert missed["report_class"] is None  # stored as '' (part of the unique key)
    assert missed["ended_count"] == 10 and missed["response_p99_ms"] == 500.0
    assert {name: missed[name] for name in ONLINE_DELAYS} == ONLINE_DELAYS
    # A row without delay samples (a day before the scheduler sampled) has nulls, not zeros.
    assert all(page["items"][0][name] is None for name in ONLINE_DELAYS)


async def test_interval_picks_the_whole_day_rows_or_all(client, day):
    whole = await rows_of(client, date=DAY.isoformat(), interval=1440)
    assert keys_of(whole) == [("2026-11-21", "00:00", 1440, "BATCH", 1), ("2026-11-21", "00:00", 1440, "ONLINE", 1)]
    assert whole["items"][1]["buckets"] == spread(23, 7) and whole["items"][1]["ended_count"] == 30
    everything = await rows_of(client, date_from=DAY.isoformat(), interval="ALL")
    assert everything["total"] == 8
    # At midnight the whole-day row sorts with the first interval's, by environment, node, class and period.
    assert keys_of(everything)[:3] == [
        ("2026-11-21", "00:00", 1440, "BATCH", 1),
        ("2026-11-21", "00:00", 15, "ONLINE", 1),
        ("2026-11-21", "00:00", 1440, "ONLINE", 1),
    ]
    assert (await rows_of(client, date=DAY.isoformat(), interval=60))["items"] == []


async def test_filters(client, app, day):
    await store_rows(
        app.state.wlm.sessions,
        [report_row(1, node="SITE2"), report_row(1, application_environment="BILLING"), report_row(1, report_class="ATMA")],
    )
    day_only = {"date_from": DAY.isoformat(), "date_to": DAY.isoformat()}
    assert (await rows_of(client, **day_only))["total"] == 8
    assert (await rows_of(client, **day_only, service_class="batch"))["total"] == 2
    assert (await rows_of(client, **day_only, service_class="BATCH", period=2))["total"] == 1
    assert [r["node"] for r in (await rows_of(client, **day_only, node="site2"))["items"]] == ["SITE2"]
    assert (await rows_of(client, **day_only, application_environment="billing"))["items"][0]["application_environment"] == "BILLING"
    assert (await rows_of(client, **day_only, application_environment="PAYROLL"))["total"] == 7
    assert [r["report_class"] for r in (await rows_of(client, **day_only, report_class="atma"))["items"]] == ["ATMA"]
    assert (await rows_of(client, date_from=(DAY + timedelta(days=1)).isoformat()))["total"] == 1
    assert (await rows_of(client, date_to=DAY.isoformat()))["total"] == 8
    assert (await rows_of(client))["total"] == 9  # every date, 15-minute rows
    assert (await rows_of(client, date=(DAY - timedelta(days=1)).isoformat()))["items"] == []
    # Dates combine as the other filters do: a date in the range is that day; dates no row can meet match none.
    before, after = (DAY - timedelta(days=1)).isoformat(), (DAY + timedelta(days=1)).isoformat()
    assert (await rows_of(client, date=DAY.isoformat(), date_from=before, date_to=after))["total"] == 8
    assert (await rows_of(client, date=DAY.isoformat(), date_from=after))["items"] == []
    assert (await rows_of(client, date_from=after, date_to=before))["items"] == []


async def test_pages_follow_next_links_that_keep_the_filters(client, day):
    everything = await rows_of(client, interval="all", limit=1000)
    seen: list[dict[str, Any]] = []
    path: str | None = f"{WORKLOAD}?interval=all&limit=3"
    pages = 0
    while path:
        response = await client.get(path, headers=ADMIN)
        assert response.status_code == 200, response.text
        page = response.json()
        assert page["total"] == 8 and page["limit"] == 3 and page["offset"] == 3 * pages
        seen += page["items"]
        path, pages = page["next"], pages + 1
        if path:
            assert path.startswith(f"{WORKLOAD}?") and "interval=all" in path
    assert pages == 3 and seen == everything["items"]
    filtered = await rows_of(client, service_class="ONLINE", limit=1)
    assert filtered["next"] is not None and "service_class=ONLINE" in filtered["next"] and "offset=1" in filtered["next"]


async def test_bad_input_is_refused_with_the_error_body(client, day):
    today = DAY.isoformat()
    for params, path in [
        ({"date_from": "2020-01-01", "date_to": "2026-01-01"}, "query.date_to"),
        ({"interval": "x"}, "query.interval"),
        ({"interval": "0"}, "query.interval"),
        ({"interval": "1441"}, "query.interval"),
        ({"interval": "-15"}, "query.interval"),
        ({"interval": "9" * 9}, "query.interval"),
        ({"date": "2026-13-01"}, "query.date"),
        ({"date": "yesterday"}, "query.date"),
        ({"date_from": "99999-01-01"}, "query.date_from"),
        ({"limit": 0}, "query.limit"),
        ({"limit": 1001}, "query.limit"),
        ({"offset": -1}, "query.offset"),
        ({"offset": 2**31}, "query.offset"),
        ({"period": 0}, "query.period"),
        ({"service_class": "X" * 33}, "query.service_class"),
    ]:
        error = await refused(client, WORKLOAD, params)
        assert error["code"] == "validation_failed" and [e["path"] for e in error["errors"]] == [path], (params, error)
    # A range of exactly the maximum is fine; unknown parameters are ignored.
    assert (await rows_of(client, date_from="2025-11-21", date_to="2026-11-21", colour="blue"))["total"] == 5
    for summary, params in [("yesterday", {}), ("2026-02-30", {}), (today, {"interval": 0}), (today, {"interval": 1440})]:
        await refused(client, f"{WORKLOAD}/{summary}/summary", params)
    await refused(client, f"{WORKLOAD}/dates", {"limit": 0})


async def test_reading_needs_a_viewer_key(client, day):
    assert (await client.get(WORKLOAD)).json()["error"]["code"] == "missing_api_key"
    queue_manager = await make_key(client, "qm", ["queue_manager"])
    for path in (WORKLOAD, f"{WORKLOAD}/dates", f"{WORKLOAD}/{DAY}/summary"):
        response = await client.get(path, headers=queue_manager)
        assert response.status_code == 403 and response.json()["error"]["code"] == "missing_role"
    viewer = await make_key(client, "watcher", ["viewer"])
    assert (await client.get(WORKLOAD, headers=viewer)).json()["total"] == 6


async def test_summary_per_service_class_period(client, app, day):
    # ONLINE's interval 3 ended nothing (PI unknown): counted, never the worst.
    await store_rows(app.state.wlm.sessions, [report_row(3, buckets=[0] * 14)])
    response = await client.get(f"{WORKLOAD}/{DAY}/summary", headers=ADMIN)
    assert response.status_code == 200, response.text
    summary = response.json()
    assert (summary["date"], summary["interval_minutes"], summary["bucket_labels"]) == ("2026-11-21", 15, list(BUCKET_LABELS))
    periods = {(i["service_class"], i["period"]): i for i in summary["items"]}
    assert [(i["service_class"], i["period"]) for i in summary["items"]] == [("BATCH", 1), ("BATCH", 2), ("ONLINE", 1)]

    online = periods[("ONLINE", 1)]
    assert (online["application_environment"], online["node"], online["report_class"], online["policy_version"]) == (
        "PAYROLL",
        "LOCAL",
        None,
        1,
    )
    assert online["whole_day"]["interval_minutes"] == 1440 and online["whole_day"]["buckets"] == spread(23, 7)
    assert (online["intervals"], online["intervals_missed"]) == (4, 1)
    assert (online["worst_interval_start"], online["worst_interval_pi"]) == ("2026-11-21T00:30:00Z", 2.0)

    batch = periods[("BATCH", 1)]
    assert (batch["intervals"], batch["intervals_missed"], batch["worst_interval_pi"]) == (1, 1, 1.25)
    assert batch["whole_day"]["performance_index"] == 0.5
    discretionary = periods[("BATCH", 2)]
    assert discretionary["whole_day"] is None  # the report has no whole-day row of it
    assert (discretionary["intervals"], discretionary["intervals_missed"], discretionary["worst_interval_pi"]) == (1, 0, 0.81)


async def test_summary_worst_interval_is_the_earliest_of_equals(client, app):
    await store_rows(app.state.wlm.sessions, [report_row(slot, buckets=spread(5, 5)) for slot in (7, 4, 9)] + [report_row(2)])
    online = (await client.get(f"{WORKLOAD}/{DAY}/summary", headers=ADMIN)).json()["items"][0]
    assert (online["intervals"], online["intervals_missed"]) == (4, 3)
    assert (online["worst_interval_start"], online["worst_interval_pi"]) == ("2026-11-21T01:00:00Z", 2.0)


async def test_summary_of_a_day_without_report_is_404(client, day):
    response = await client.get(f"{WORKLOAD}/2026-11-20/summary", headers=ADMIN)
    assert response.status_code == 404
    assert response.json()["error"] == {"code": "no_report", "message": "no workload report for 2026-11-20", "date": "2026-11-20"}


async def test_dates_newest_first(client, day):
    assert (await client.get(f"{WORKLOAD}/dates", headers=ADMIN)).json() == {"items": ["2026-11-22", "2026-11-21"]}
    assert (await client.get(f"{WORKLOAD}/dates", headers=ADMIN, params={"limit": 1})).json() == {"items": ["2026-11-22"]}


async def test_dashboard_page_and_assets_load_without_a_key(client):
    page = await client.get("/dashboard")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script type="module" src="/dashboard/static/dashboard.js">' in page.text
    scripts = ("dashboard.js", "common.js", "charts.js", "report.js", "whatif.js")
    for asset, media in [*((script, "javascript") for script in scripts), ("dashboard.css", "text/css")]:
        response = await client.get(f"/dashboard/static/{asset}")
        assert response.status_code == 200 and media in response.headers["content-type"], asset
    missing = await client.get("/dashboard/static/nothing.js")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
