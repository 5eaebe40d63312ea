"""Reading the workload activity report that the nightly Spark job writes (spark_jobs/workload_activity): report rows
by filter, a day's summary per service class period, and the dates that have a report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import ColumnElement, case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import NotFound, ValidationFailed
from app.reports.models import WorkloadReportRow
from app.reports.schemas import ServiceClassPeriodDay, WorkloadReportRowOut
from spark_jobs.contract.report import WHOLE_DAY_MINUTES

DEFAULT_INTERVAL_MINUTES = 15
ALL_INTERVALS = "all"
# An explicit date range longer than this is refused: nobody reads more than a year of intervals through one query,
# and a mistyped year should not make the database count millions of rows.
MAX_RANGE_DAYS = 366

_ROW = WorkloadReportRow
# The stable order of report rows: the first six are the contract, the rest make it total.
_ORDER = (
    _ROW.report_date,
    _ROW.interval_start,
    _ROW.application_environment,
    _ROW.node,
    _ROW.service_class,
    _ROW.period,
    _ROW.interval_minutes,
    _ROW.report_class,
    _ROW.policy_version,
    _ROW.id,
)
# What tells one service class period's figures from another's within a day.
_PERIOD_KEY = (_ROW.application_environment, _ROW.node, _ROW.service_class, _ROW.period, _ROW.report_class, _ROW.policy_version)
PeriodKey = tuple[str, str, str, int, str, int]


def _period_key(row: Any) -> PeriodKey:
    """The _PERIOD_KEY values of a report row, or of a result row that selected those columns."""
    return (row.application_environment, row.node, row.service_class, row.period, row.report_class, row.policy_version)


@dataclass(frozen=True, slots=True)
class ReportFilters:
    date_from: date | None
    date_to: date | None
    interval_minutes: int | None  # None: every interval length
    service_class: str | None
    application_environment: str | None
    node: str | None
    report_class: str | None
    period: int | None

    def conditions(self) -> list[ColumnElement[bool]]:
        wanted: list[ColumnElement[bool]] = []
        if self.date_from is not None:
            wanted.append(_ROW.report_date >= self.date_from)
        if self.date_to is not None:
            wanted.append(_ROW.report_date <= self.date_to)
        if self.interval_minutes is not None:
            wanted.append(_ROW.interval_minutes == self.interval_minutes)
        for column, value in (
            (_ROW.service_class, self.service_class),
            (_ROW.application_environment, self.application_environment),
            (_ROW.node, self.node),
            (_ROW.report_class, self.report_class),
            (_ROW.period, self.period),
        ):
            if value is not None:
                wanted.append(column == value)
        return wanted


def _query_error(parameter: str, message: str) -> ValidationFailed:
    # The same path FastAPI's own validation gives a query parameter.
    return ValidationFailed([{"path": f"query.{parameter}", "message": message}])


# What parse_interval takes, for the OpenAPI document: minutes from 1 to 1440, or `all` in any case.
INTERVAL_PATTERN = r"^(0*([1-9][0-9]{0,2}|1[0-3][0-9]{2}|14[0-3][0-9]|1440)|[Aa][Ll][Ll])$"


def parse_interval(value: str) -> int | None:
    """`interval` as sent: minutes (1..1440; 1440 is the whole day) or `all` (None: every interval length)."""
    if value.lower() == ALL_INTERVALS:
        return None
    if not value.isdigit() or not 1 <= int(value) <= WHOLE_DAY_MINUTES:
        raise _query_error("interval", f"must be minutes from 1 to {WHOLE_DAY_MINUTES}, or '{ALL_INTERVALS}'")
    return int(value)


def report_filters(
    *,
    on: date | None,
    date_from: date | None,
    date_to: date | None,
    interval: str,
    service_class: str | None,
    application_environment: str | None,
    node: str | None,
    report_class: str | None,
    period: int | None,
) -> ReportFilters:
    """The filters of a report query, checked: one date, a range of at most MAX_RANGE_DAYS, or both (the date if it
    is in the range); names in upper case, as the policy stores them. As with any filters, dates that no row can meet
    (a range that ends before it starts, a date outside the range) match none: a schema cannot say that one parameter
    must come before another, so the service does not refuse them either."""
    if on is not None:
        date_from = on if date_from is None else max(date_from, on)
        date_to = on if date_to is None else min(date_to, on)
    if date_from is not None and date_to is not None and (date_to - date_from).days >= MAX_RANGE_DAYS:
        raise _query_error("date_to", f"a range may span at most {MAX_RANGE_DAYS} days")
    return ReportFilters(
        date_from=date_from,
        date_to=date_to,
        interval_minutes=parse_interval(interval),
        service_class=_upper(service_class),
        application_environment=_upper(application_environment),
        node=_upper(node),
        report_class=_upper(report_class),
        period=period,
    )


def _upper(name: str | None) -> str | None:
    return name.upper() if name is not None else None


async def list_rows(session: AsyncSession, filters: ReportFilters, *, limit: int, offset: int) -> tuple[list[WorkloadReportRow], int]:
    query = select(_ROW).where(*filters.conditions())
    total = await session.scalar(select(func.count()).select_from(query.subquery()))
    rows = await session.scalars(query.order_by(*_ORDER).limit(limit).offset(offset))
    return list(rows), total or 0


@dataclass(frozen=True, slots=True)
class _IntervalFigures:
    intervals: int
    missed: int
    worst_start: datetime | None
    worst_pi: float | None


async def _interval_figures(session: AsyncSession, day: date, interval_minutes: int) -> dict[PeriodKey, _IntervalFigures]:
    """Per service class period of `day`: how many intervals it has, how many missed the goal, and the worst one,
    counted by the database (a day has up to 96 intervals per period)."""
    per_period: dict[str, Any] = {"partition_by": _PERIOD_KEY}
    ranked = (
        select(
            *_PERIOD_KEY,
            _ROW.interval_start,
            _ROW.performance_index,
            func.count().over(**per_period).label("intervals"),
            func.sum(case((_ROW.performance_index > 1, 1), else_=0)).over(**per_period).label("missed"),
            func.row_number().over(**per_period, order_by=(_ROW.performance_index.desc().nulls_last(), _ROW.interval_start)).label("rank"),
        )
        .where(_ROW.report_date == day, _ROW.interval_minutes == interval_minutes)
        .subquery()
    )
    rows = await session.execute(select(ranked).where(ranked.c.rank == 1))
    figures = {}
    for row in rows:
        worst_known = row.performance_index is not None
        figures[_period_key(row)] = _IntervalFigures(
            intervals=row.intervals,
            missed=int(row.missed or 0),
            worst_start=row.interval_start if worst_known else None,
            worst_pi=row.performance_index,
        )
    return figures


async def day_summary(session: AsyncSession, day: date, interval_minutes: int) -> list[ServiceClassPeriodDay]:
    """Each service class period of `day`: its whole-day row and its `interval_minutes` intervals summed up.
    NotFound when the day has no report at all."""
    whole_days = {
        _period_key(row): row
        for row in await session.scalars(select(_ROW).where(_ROW.report_date == day, _ROW.interval_minutes == WHOLE_DAY_MINUTES))
    }
    figures = await _interval_figures(session, day, interval_minutes)
    if not whole_days and not figures and not await _has_report(session, day):
        raise NotFound(f"no workload report for {day.isoformat()}", code="no_report", date=day.isoformat())
    no_intervals = _IntervalFigures(intervals=0, missed=0, worst_start=None, worst_pi=None)
    items = []
    for key in sorted(whole_days.keys() | figures.keys()):
        ae, node, service_class, period, report_class, policy_version = key
        whole_day, interval = whole_days.get(key), figures.get(key, no_intervals)
        items.append(
            ServiceClassPeriodDay(
                application_environment=ae,
                node=node,
                service_class=service_class,
                period=period,
                report_class=report_class or None,
                policy_version=policy_version,
                whole_day=WorkloadReportRowOut.model_validate(whole_day) if whole_day is not None else None,
                intervals=interval.intervals,
                intervals_missed=interval.missed,
                worst_interval_start=interval.worst_start,
                worst_interval_pi=interval.worst_pi,
            )
        )
    return items


async def _has_report(session: AsyncSession, day: date) -> bool:
    return await session.scalar(select(_ROW.id).where(_ROW.report_date == day).limit(1)) is not None


async def report_dates(session: AsyncSession, *, limit: int) -> list[date]:
    return list(await session.scalars(select(_ROW.report_date).distinct().order_by(_ROW.report_date.desc()).limit(limit)))
