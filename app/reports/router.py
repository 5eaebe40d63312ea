from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from app.deps import Offset, SessionDep, Viewer
from app.reports import service
from app.reports.schemas import ReportDates, WorkloadReportPage, WorkloadReportRowOut, WorkloadSummary
from app.shared.schemas import IsoDate
from spark_jobs.contract.report import WHOLE_DAY_MINUTES

router = APIRouter(prefix="/v1/reports", tags=["reports"])
dashboard_router = APIRouter(include_in_schema=False)

DASHBOARD_DIR = Path(__file__).parent / "dashboard"
# Read once at import: a small page sent from memory. As a FileResponse its body, streamed beside a disconnect
# listener, once came back empty under test (CI, session 14).
_DASHBOARD_PAGE = (DASHBOARD_DIR / "index.html").read_bytes()
# The page holds an API key (in sessionStorage): it runs only its own scripts and talks only to this service.
_DASHBOARD_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "Cache-Control": "no-cache",
}

ReportName = Annotated[str | None, Query(min_length=1, max_length=32, description="case-insensitive")]


@router.get(
    "/workload",
    response_model=WorkloadReportPage,
    summary="RMF WLMGL: workload activity report rows by date, interval, service class period, environment and node",
)
async def workload_report(
    request: Request,
    session: SessionDep,
    _: Viewer,
    on: Annotated[IsoDate | None, Query(alias="date", description="one day (with date_from or date_to: if it is in the range)")] = None,
    date_from: Annotated[IsoDate | None, Query(description=f"first day (a range spans at most {service.MAX_RANGE_DAYS} days)")] = None,
    date_to: Annotated[IsoDate | None, Query(description="last day, included")] = None,
    interval: Annotated[
        str,
        Query(
            max_length=8,
            pattern=service.INTERVAL_PATTERN,
            description=f"interval length in minutes ({WHOLE_DAY_MINUTES}: the whole-day rows), or `{service.ALL_INTERVALS}`",
        ),
    ] = str(service.DEFAULT_INTERVAL_MINUTES),
    service_class: ReportName = None,
    application_environment: ReportName = None,
    node: ReportName = None,
    report_class: ReportName = None,
    period: Annotated[int | None, Query(ge=1, le=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> WorkloadReportPage:
    filters = service.report_filters(
        on=on,
        date_from=date_from,
        date_to=date_to,
        interval=interval,
        service_class=service_class,
        application_environment=application_environment,
        node=node,
        report_class=report_class,
        period=period,
    )
    rows, total = await service.list_rows(session, filters, limit=limit, offset=offset)
    following = None
    if offset + limit < total:
        url = request.url.include_query_params(offset=offset + limit, limit=limit)
        following = f"{url.path}?{url.query}"
    return WorkloadReportPage(
        items=[WorkloadReportRowOut.model_validate(row) for row in rows], total=total, limit=limit, offset=offset, next=following
    )


@router.get("/workload/dates", response_model=ReportDates, summary="The dates that have a workload activity report, newest first")
async def workload_report_dates(session: SessionDep, _: Viewer, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> ReportDates:
    return ReportDates(items=await service.report_dates(session, limit=limit))


@router.get(
    "/workload/{date}/summary",
    response_model=WorkloadSummary,
    summary="A day per service class period: the whole-day figures, intervals that missed the goal, the worst interval",
)
async def workload_summary(
    date: IsoDate,
    session: SessionDep,
    _: Viewer,
    interval: Annotated[int, Query(ge=1, lt=WHOLE_DAY_MINUTES, description="the interval length to count")] = (
        service.DEFAULT_INTERVAL_MINUTES
    ),
) -> WorkloadSummary:
    return WorkloadSummary(date=date, interval_minutes=interval, items=await service.day_summary(session, date, interval))


@dashboard_router.get("/dashboard")
async def dashboard() -> HTMLResponse:
    """The page loads without a key; its scripts ask for one and send it with every API call."""
    return HTMLResponse(_DASHBOARD_PAGE, headers=_DASHBOARD_HEADERS)


def dashboard_assets() -> StaticFiles:
    return StaticFiles(directory=DASHBOARD_DIR / "static")
