// The dashboard: live application environments and performance (refreshed every few seconds), and the nightly
// workload activity report of a chosen date as charts. It reads the same REST API as every other client, with an
// API key the user types once; the key is kept in sessionStorage (this tab only), never in the URL.
import { PALETTE, barChart, lineChart } from "./charts.js";

const KEY_STORAGE = "wlm.apiKey";
const LIVE_REFRESH_MS = 5000;
const PAGE_LIMIT = 1000;
const MINUTES_PER_DAY = 1440;
// A PI beyond this is drawn at the top of the chart; a velocity PI can reach 100 and would flatten every other line.
const PI_CHART_CAP = 5;
// The last bucket within the goal (app/policy/goals.py); the buckets up to it are drawn as met.
const GOAL_BUCKET_LABEL = "<=100%";

const ADVISORIES_SHOWN = 20;

const $ = (id) => document.getElementById(id);
let liveTimer = null;
let advisoriesStream = null;
let reportSummary = null;

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
  }
}

async function api(path) {
  const response = await fetch(path, { headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY_STORAGE)}`, Accept: "application/json" } });
  const body = await response.json().catch(() => null);
  if (response.status === 401) {
    askForKey("The key was not accepted (unknown, revoked or expired); enter another.");
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

// ---------------------------------------------------------------------------------------------------------------
// Formatting and DOM helpers (text only: nothing the API returns is parsed as HTML)
// ---------------------------------------------------------------------------------------------------------------

function cell(text, className = "") {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function row(cells, attributes = {}) {
  const tr = document.createElement("tr");
  for (const [key, value] of Object.entries(attributes)) tr.setAttribute(key, value);
  tr.append(...cells);
  return tr;
}

function fill(tableId, rows, emptyText) {
  const table = $(tableId);
  const body = table.tBodies[0];
  if (rows.length === 0) {
    const td = cell(emptyText, "empty");
    td.colSpan = table.tHead.rows[0].cells.length;
    body.replaceChildren(row([td]));
  } else {
    body.replaceChildren(...rows);
  }
}

const number = (value, digits = 0) => (value === null || value === undefined ? "–" : value.toFixed(digits));
const milliseconds = (value) => (value === null || value === undefined ? "–" : `${value.toFixed(value < 10 ? 1 : 0)} ms`);
const share = (value) => (value === null || value === undefined ? "–" : `${(value * 100).toFixed(1)} %`);
const piClass = (pi) => (pi === null || pi === undefined ? "pi unknown" : pi <= 1 ? "pi met" : "pi missed");
const perClass = (counts) => Object.entries(counts).map(([name, count]) => `${name} ${count}`).join(", ") || "–";

function piCell(pi) {
  return cell(number(pi, 2), `number ${piClass(pi)}`);
}

// A goal as the policy writes it: {type, response_time_ms, percentile, velocity}.
function describeGoal(goal) {
  switch (goal.type) {
    case "average": return `average ${goal.response_time_ms} ms`;
    case "percentile": return `${goal.percentile} % within ${goal.response_time_ms} ms`;
    case "velocity": return `velocity ${goal.velocity}`;
    default: return "discretionary";
  }
}

// A report row's goal columns in the policy's shape.
const reportGoal = (r) => ({ type: r.goal_type, response_time_ms: r.goal_ms, percentile: r.goal_percentile, velocity: r.goal_velocity });

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

// ---------------------------------------------------------------------------------------------------------------
// The key
// ---------------------------------------------------------------------------------------------------------------

function askForKey(message = "") {
  sessionStorage.removeItem(KEY_STORAGE);
  clearTimeout(liveTimer);
  advisoriesStream?.abort();
  $("content").hidden = true;
  $("forget-key").hidden = true;
  $("key-form").hidden = false;
  $("key-error").textContent = message;
  setStatus("");
  $("api-key").focus();
}

async function connect(event) {
  event.preventDefault();
  sessionStorage.setItem(KEY_STORAGE, $("api-key").value.trim());
  $("api-key").value = "";
  try {
    const who = await api("/v1/whoami");
    start(who);
  } catch (error) {
    if (error.status !== 401) askForKey(error.message);
  }
}

function start(who) {
  $("key-form").hidden = true;
  $("content").hidden = false;
  $("forget-key").hidden = false;
  setStatus(`signed in as ${who.principal}`);
  refreshLive();
  followAdvisories();
  loadReportDates();
}

// ---------------------------------------------------------------------------------------------------------------
// Advisories (GET /v1/events): the last few, then each as it comes. A fetch rather than an EventSource, which
// cannot send the API key; on a broken stream it reconnects after what it saw.
// ---------------------------------------------------------------------------------------------------------------

function showAdvisory(event) {
  const details = Object.entries(event.data).map(([name, value]) => `${name}=${typeof value === "object" ? JSON.stringify(value) : value}`);
  const time = new Date(event.at * 1000).toLocaleTimeString();
  const tbody = $("advisories").tBodies[0];
  tbody.querySelector("tr.empty")?.remove();
  tbody.prepend(row([cell(time), cell(event.subject), cell(details.join(" "))], { "data-subject": event.subject }));
  while (tbody.rows.length > ADVISORIES_SHOWN) tbody.deleteRow(-1);
}

async function followAdvisories(after = null) {
  advisoriesStream?.abort();
  const stream = (advisoriesStream = new AbortController());
  const query = after ? `since=${encodeURIComponent(after)}` : `last=${ADVISORIES_SHOWN}`;
  let seen = after;
  try {
    const response = await fetch(`/v1/events?${query}`, {
      headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY_STORAGE)}`, Accept: "text/event-stream" },
      signal: stream.signal,
    });
    if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const data = buffer.slice(0, end).split("\n").find((line) => line.startsWith("data: "));
        buffer = buffer.slice(end + 2);
        if (data) {
          const event = JSON.parse(data.slice("data: ".length));
          seen = event.id;
          showAdvisory(event);
        }
      }
    }
  } catch (error) {
    if (stream.signal.aborted || error.status === 401 || error.status === 403) return;
  }
  if (!stream.signal.aborted) setTimeout(() => followAdvisories(seen), LIVE_REFRESH_MS);
}

// ---------------------------------------------------------------------------------------------------------------
// Live: application environments (D WLM,APPLENV=*) and the latest goal evaluation per service class period
// ---------------------------------------------------------------------------------------------------------------

async function serversWanted(name) {
  try {
    const scaling = await api(`/v1/scaling/application-environments/${encodeURIComponent(name)}`);
    const wanted = {};
    for (const node of scaling.nodes) {
      for (const [serviceClass, count] of Object.entries(node.desired_per_service_class)) wanted[serviceClass] = (wanted[serviceClass] ?? 0) + count;
    }
    return perClass(wanted);
  } catch (error) {
    if (error.status === 404) return "–"; // it has left the policy (DELETING): nothing is decided for it
    throw error;
  }
}

async function liveEnvironments() {
  const display = await api("/v1/application-environments");
  const wanted = await Promise.all(display.items.map((ae) => serversWanted(ae.name)));
  const rows = display.items.map((ae, index) => {
    const pis = Object.entries(ae.performance ?? {}).map(([name, pi]) => `${name} ${number(pi, 2)}`).join(", ") || "–";
    return row(
      [
        cell(ae.dynamic ? `${ae.name} (dynamic)` : ae.name),
        cell(ae.state, `state ${ae.state.toLowerCase()}`),
        cell(String(ae.servers), "number"),
        cell(wanted[index]),
        cell(String(ae.in_flight), "number"),
        cell(`${ae.queued_total}${ae.queued_total ? ` (${perClass(ae.queued)})` : ""}`),
        cell(pis),
      ],
      { "data-environment": ae.name },
    );
  });
  fill("environments", rows, "No application environments in the active policy.");
}

async function livePerformance() {
  let policy;
  try {
    policy = await api("/v1/policy");
  } catch (error) {
    if (error.status !== 404) throw error;
    fill("performance", [], "No policy installed yet.");
    return;
  }
  const names = policy.definition.service_classes.map((sc) => sc.name.toUpperCase());
  const answers = await Promise.all(names.map((name) => api(`/v1/service-classes/${encodeURIComponent(name)}/performance`)));
  const rows = answers.flatMap((answer) =>
    answer.periods.map((p) =>
      row(
        [
          cell(p.service_class),
          cell(String(p.period), "number"),
          cell(p.application_environment),
          cell(p.node),
          cell(describeGoal(p.goal)),
          piCell(p.performance_index),
          cell(number(p.ended_per_second, 2), "number"),
          cell(milliseconds(p.avg_response_ms), "number"),
          cell(milliseconds(p.p90_response_ms), "number"),
          cell(share(p.goal_met_share), "number"),
          cell(String(p.queued), "number"),
        ],
        { "data-service-class": p.service_class, "data-period": String(p.period) },
      ),
    ),
  );
  fill("performance", rows, "No goal evaluation yet (the first comes within seconds of the first ended request).");
}

async function refreshLive() {
  clearTimeout(liveTimer);
  try {
    await Promise.all([liveEnvironments(), livePerformance()]);
    $("live-error").textContent = "";
    $("live-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    if (error.status === 401) return;
    $("live-error").textContent = `Could not refresh: ${error.message}`;
  }
  liveTimer = setTimeout(refreshLive, LIVE_REFRESH_MS);
}

// ---------------------------------------------------------------------------------------------------------------
// The nightly report of a chosen date
// ---------------------------------------------------------------------------------------------------------------

const scopeKey = (item) => `${item.application_environment}@${item.node}`;
const seriesKey = (item) => [item.service_class, item.period, item.report_class ?? "", item.policy_version].join("|");

function seriesLabel(item, versions) {
  let label = `${item.service_class} period ${item.period}`;
  if (item.report_class) label += ` (${item.report_class})`;
  if (versions > 1) label += ` policy v${item.policy_version}`;
  return label;
}

function options(select, choices) {
  const previous = select.value;
  select.replaceChildren(
    ...choices.map(({ value, label }) => {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = label;
      return option;
    }),
  );
  if (choices.some((c) => c.value === previous)) select.value = previous;
}

function reportMessage(text) {
  $("report-message").textContent = text;
  $("pi-chart").hidden = $("distribution-chart").hidden = Boolean(text);
}

async function loadReportDates() {
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
  const hours = [0, 3, 6, 9, 12, 15, 18, 21, 24];
  lineChart($("pi-chart").querySelector("svg.chart"), {
    series,
    xDomain: [0, MINUTES_PER_DAY],
    xStep: reportSummary.interval_minutes, // an interval without a row had no requests: no PI to join across
    xTicks: hours.map((h) => ({ value: h * 60, label: `${String(h).padStart(2, "0")}:00` })),
    xLabel: `time of day (UTC), ${reportSummary.interval_minutes}-minute intervals`,
    yLabel: "performance index",
    yCap: PI_CHART_CAP,
    reference: { value: 1, label: "PI = 1 (goal)" },
  });
  const legend = $("pi-chart").querySelector(".legend");
  legend.replaceChildren(
    ...series.map((s) => {
      const entry = document.createElement("li");
      const swatch = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      swatch.setAttribute("viewBox", "0 0 12 12");
      swatch.setAttribute("class", "swatch");
      const dot = document.createElementNS("http://www.w3.org/2000/svg", "circle");
      for (const [name, value] of Object.entries({ cx: 6, cy: 6, r: 5, fill: s.color })) dot.setAttribute(name, value);
      swatch.appendChild(dot);
      entry.append(swatch, s.label);
      return entry;
    }),
  );
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

// ---------------------------------------------------------------------------------------------------------------

$("key-form").addEventListener("submit", connect);
$("forget-key").addEventListener("click", () => askForKey());
$("report-date").addEventListener("change", loadReport);
$("report-scope").addEventListener("change", drawScope);
$("report-series").addEventListener("change", drawDistribution);

if (sessionStorage.getItem(KEY_STORAGE)) {
  api("/v1/whoami").then(start, (error) => error.status !== 401 && askForKey(error.message));
} else {
  askForKey();
}
