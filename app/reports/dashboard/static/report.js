// The nightly workload activity report of a chosen date (GET /v1/reports/workload...): the PI of every service class
// period across the day's intervals, a class period's 14-bucket distribution, and the day's summary table.
import { PALETTE, barChart, dayPiChart, legendEntry } from "./charts.js";
import { $, api, cell, describeGoal, fill, milliseconds, number, options, piCell, row, share } from "./common.js";

const PAGE_LIMIT = 1000;
// The last bucket within the goal (spark_jobs/contract/goals.py); the buckets up to it are drawn as met.
const GOAL_BUCKET_LABEL = "<=100%";

let reportSummary = null;

// A report row's goal columns in the policy's shape.
const reportGoal = (r) => ({ type: r.goal_type, response_time_ms: r.goal_ms, percentile: r.goal_percentile, velocity: r.goal_velocity });

const scopeKey = (item) => `${item.application_environment}@${item.node}`;
const seriesKey = (item) => [item.service_class, item.period, item.report_class ?? "", item.policy_version].join("|");

function seriesLabel(item, versions) {
  let label = `${item.service_class} period ${item.period}`;
  if (item.report_class) label += ` (${item.report_class})`;
  if (versions > 1) label += ` policy v${item.policy_version}`;
  return label;
}

function reportMessage(text) {
  $("report-message").textContent = text;
  $("pi-chart").hidden = $("distribution-chart").hidden = Boolean(text);
}

export async function loadReportDates() {
  try {
    const dates = await api("/v1/reports/workload/dates");
    options($("report-date"), dates.items.map((d) => ({ value: d, label: d })));
    if (dates.items.length === 0) {
      reportMessage("No nightly report yet: the first is written after the first night (or `wlm report run --date ...`).");
      fill("report-summary", [], "–");
      return;
    }
    await loadReport();
  } catch (error) {
    if (error.status !== 401) reportMessage(`Could not load the reports: ${error.message}`);
  }
}

async function loadReport() {
  const date = $("report-date").value;
  try {
    reportSummary = await api(`/v1/reports/workload/${encodeURIComponent(date)}/summary`);
  } catch (error) {
    if (error.status !== 401) reportMessage(`Could not load the report of ${date}: ${error.message}`);
    return;
  }
  const scopes = [...new Map(reportSummary.items.map((item) => [scopeKey(item), item])).values()];
  options($("report-scope"), scopes.map((item) => ({ value: scopeKey(item), label: `${item.application_environment} on ${item.node}` })));
  await drawScope();
}

function itemsInScope() {
  return reportSummary.items.filter((item) => scopeKey(item) === $("report-scope").value);
}

async function allRows(query) {
  const rows = [];
  let next = `/v1/reports/workload?${new URLSearchParams({ ...query, limit: PAGE_LIMIT })}`;
  while (next) {
    const page = await api(next);
    rows.push(...page.items);
    next = page.next;
  }
  return rows;
}

async function drawScope() {
  const items = itemsInScope();
  const versions = new Set(items.map((item) => item.policy_version)).size;
  options($("report-series"), items.map((item) => ({ value: seriesKey(item), label: seriesLabel(item, versions) })));
  fillSummary(items);
  const [applicationEnvironment, node] = $("report-scope").value.split("@");
  let rows;
  try {
    rows = await allRows({ date: reportSummary.date, application_environment: applicationEnvironment, node, interval: reportSummary.interval_minutes });
  } catch (error) {
    if (error.status !== 401) reportMessage(`Could not load the report rows: ${error.message}`);
    return;
  }
  reportMessage("");
  drawPiChart(items, rows, versions);
  drawDistribution();
}

function fillSummary(items) {
  const rows = items.map((item) => {
    const day = item.whole_day;
    return row(
      [
        cell(item.service_class),
        cell(String(item.period), "number"),
        cell(item.report_class ?? "–"),
        cell(day ? describeGoal(reportGoal(day)) : "–"),
        cell(day ? String(day.ended_count) : "–", "number"),
        cell(milliseconds(day?.response_avg_ms), "number"),
        cell(milliseconds(day?.response_p90_ms), "number"),
        piCell(day?.performance_index ?? null),
        cell(`${item.intervals_missed} of ${item.intervals}`, "number"),
        piCell(item.worst_interval_pi),
      ],
      { "data-series": seriesKey(item) },
    );
  });
  fill("report-summary", rows, "Nothing reported for this environment.");
}

function drawPiChart(items, rows, versions) {
  const dayStart = Date.parse(`${reportSummary.date}T00:00:00Z`);
  const series = items.map((item, index) => {
    const key = seriesKey(item);
    const points = rows
      .filter((r) => seriesKey(r) === key)
      .map((r) => {
        const minute = (Date.parse(r.interval_start) - dayStart) / 60000;
        return {
          x: minute,
          y: r.performance_index,
          title: `${seriesLabel(item, versions)} ${r.interval_start.slice(11, 16)}: PI ${number(r.performance_index, 2)}, ${r.ended_count} ended`,
          attributes: { "data-service-class": item.service_class, "data-period": item.period, "data-minute": minute },
        };
      });
    return { key, label: seriesLabel(item, versions), color: PALETTE[index % PALETTE.length], points };
  });
  dayPiChart($("pi-chart").querySelector("svg.chart"), series, reportSummary.interval_minutes);
  $("pi-chart").querySelector(".legend").replaceChildren(...series.map((s) => legendEntry(s.label, s.color)));
}

function drawDistribution() {
  const item = itemsInScope().find((i) => seriesKey(i) === $("report-series").value);
  const svg = $("distribution-chart").querySelector("svg.chart");
  const caption = $("distribution-chart").querySelector(".caption");
  const day = item?.whole_day;
  if (!day) {
    svg.replaceChildren();
    caption.textContent = "No whole-day figures for this service class period.";
    return;
  }
  const relativeToAverage = day.goal_type === "velocity" || day.goal_type === "discretionary";
  const goalBucket = reportSummary.bucket_labels.indexOf(GOAL_BUCKET_LABEL);
  barChart(svg, {
    bars: day.buckets.map((count, index) => ({
      label: reportSummary.bucket_labels[index],
      value: count,
      tone: index <= goalBucket ? "within" : "beyond",
      title: `${reportSummary.bucket_labels[index]}: ${count} requests`,
    })),
    xLabel: relativeToAverage ? "response time, % of the day's average" : "response time, % of the goal",
    yLabel: "requests ended",
    marker: { after: goalBucket, label: relativeToAverage ? "average" : "goal" },
  });
  caption.textContent =
    `${day.service_class} period ${day.period}: goal ${describeGoal(reportGoal(day))}; ${day.ended_count} ended, ` +
    `${share(day.goal_met_share)} met the goal, PI ${number(day.performance_index, 2)}.`;
}

$("report-date").addEventListener("change", loadReport);
$("report-scope").addEventListener("change", drawScope);
$("report-series").addEventListener("change", drawDistribution);
