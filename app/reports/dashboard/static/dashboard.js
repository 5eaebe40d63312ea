// The dashboard: live application environments and performance (refreshed every few seconds), the nightly
// workload activity report of a chosen date as charts, and the what-if view (whatif.js). It reads the same REST API
// as every other client, with an API key the user types once; the key is kept in sessionStorage (this tab only),
// never in the URL.
import { PALETTE, PI_CHART_CAP, legendEntry, lineChart } from "./charts.js";
import { $, ApiError, KEY_STORAGE, api, cell, describeGoal, fill, milliseconds, number, onUnauthorized, options, piCell, row, share } from "./common.js";
import { loadReportDates } from "./report.js";
import { startWhatIf, stopWhatIf } from "./whatif.js";

const LIVE_REFRESH_MS = refreshSeconds() * 1000;
// The live trends: how far back they go, and the size of their drawings (three side by side).
const TREND_SECONDS = 600;
const TREND_SIZE = { width: 480, height: 280 };
// Two samples further apart than this many refreshes are not joined by a line (the page was asleep, say).
const TREND_GAP_REFRESHES = 3;
// Steps of the trends' time axis, in seconds: the smallest that leaves at most TREND_TICKS ticks.
const TREND_TICK_STEPS = [5, 10, 15, 30, 60, 120, 300];
const TREND_TICKS = 6;

const ADVISORIES_SHOWN = 20;
// Dead letters listed, oldest first.
const DEAD_LETTERS_SHOWN = 50;

let liveTimer = null;
let advisoriesStream = null;
// Per application environment, what each live refresh saw (oldest first): the trends are drawn from it.
const trends = new Map();
// The service classes of the active policy in its order: a class keeps its colour in every trend.
let classOrder = [];

// `?refresh=2` in the page's address refreshes the live part every 2 s (1 to 60; default 5): a wall screen showing a
// demo may want it faster.
function refreshSeconds() {
  const asked = Number(new URLSearchParams(location.search).get("refresh"));
  return Number.isFinite(asked) && asked >= 1 ? Math.min(asked, 60) : 5;
}

// ---------------------------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------------------------

const perClass = (counts) => Object.entries(counts).map(([name, count]) => `${name} ${count}`).join(", ") || "–";

// A class period's delay samples: its waiting shares by cause, the largest first, those under half a percent left out.
function delays(delayPct) {
  const named = Object.entries(delayPct ?? {})
    .filter(([, pct]) => pct >= 0.5)
    .sort(([, a], [, b]) => b - a)
    .map(([cause, pct]) => `${cause.replaceAll("_", " ")} ${pct.toFixed(0)} %`);
  return named.join(", ") || (delayPct ? "none" : "–");
}

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
  stopWhatIf();
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
  startWhatIf(who);
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

// Servers per service class over the environment's nodes: those the manager wants and those connected (by the home
// class it gave them), from the scaling endpoint; null for an environment that has left the policy (DELETING).
async function serversPerClass(name) {
  try {
    const scaling = await api(`/v1/scaling/application-environments/${encodeURIComponent(name)}`);
    const wanted = {};
    const connected = {};
    for (const node of scaling.nodes) {
      for (const [serviceClass, count] of Object.entries(node.desired_per_service_class)) wanted[serviceClass] = (wanted[serviceClass] ?? 0) + count;
      for (const [serviceClass, count] of Object.entries(node.connected_per_service_class)) connected[serviceClass] = (connected[serviceClass] ?? 0) + count;
    }
    return { wanted, connected };
  } catch (error) {
    if (error.status === 404) return null;
    throw error;
  }
}

// "ONLINE 2/3, BATCH 1/1": connected/wanted of the classes that have or want servers, in the policy's order.
function connectedOfWanted(servers) {
  if (servers === null) return "–";
  const names = orderedClasses([...Object.keys(servers.wanted), ...Object.keys(servers.connected)]);
  const shown = names.filter((name) => servers.wanted[name] || servers.connected[name]);
  return shown.map((name) => `${name} ${servers.connected[name] ?? 0}/${servers.wanted[name] ?? 0}`).join(", ") || "–";
}

function orderedClasses(names) {
  const rank = (name) => (classOrder.includes(name) ? classOrder.indexOf(name) : classOrder.length);
  return [...new Set(names)].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

// The launcher's last failed start of a server of the environment: when, which process, and the end of its log.
function startErrorRow(ae, columns) {
  const failure = ae.last_start_error;
  const status = failure.exit_status === null ? "" : `, exit status ${failure.exit_status}`;
  const line = document.createElement("p");
  line.textContent = `⚠ A server of ${ae.name} failed to start at ${new Date(failure.at).toLocaleString()} (${failure.instance} on ${failure.node}${status}).`;
  const td = cell("", "start-error");
  td.colSpan = columns;
  td.append(line);
  if (failure.log_tail) {
    const tail = document.createElement("pre");
    tail.textContent = failure.log_tail;
    td.append(tail);
  }
  return row([td], { "data-start-error": ae.name });
}

async function liveEnvironments() {
  const display = await api("/v1/application-environments");
  const servers = await Promise.all(display.items.map((ae) => serversPerClass(ae.name)));
  const columns = $("environments").tHead.rows[0].cells.length;
  const rows = display.items.flatMap((ae, index) => {
    const performance = ae.performance ?? {};
    const pis = orderedClasses(Object.keys(performance)).map((name) => `${name} ${number(performance[name], 2)}`).join(", ") || "–";
    const line = row(
      [
        cell(ae.dynamic ? `${ae.name} (dynamic)` : ae.name),
        cell(ae.state, `state ${ae.state.toLowerCase()}`),
        cell(String(ae.servers), "number"),
        cell(connectedOfWanted(servers[index])),
        cell(String(ae.in_flight), "number"),
        cell(`${ae.queued_total}${ae.queued_total ? ` (${perClass(ae.queued)})` : ""}`),
        cell(pis),
      ],
      { "data-environment": ae.name },
    );
    return ae.last_start_error ? [line, startErrorRow(ae, columns)] : [line];
  });
  fill("environments", rows, "No application environments in the active policy.");
  recordTrends(display.items, servers);
  drawTrends();
}

async function livePerformance(policy) {
  if (policy === null) {
    fill("performance", [], "No policy installed yet.");
    return;
  }
  const answers = await Promise.all(classOrder.map((name) => api(`/v1/service-classes/${encodeURIComponent(name)}/performance`)));
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
          cell(p.using_pct === null || p.using_pct === undefined ? "–" : `${p.using_pct.toFixed(0)} %`, "number using"),
          cell(delays(p.delay_pct), "delays"),
          cell(number(p.ended_per_second, 2), "number"),
          cell(milliseconds(p.avg_response_ms), "number"),
          cell(milliseconds(p.p90_response_ms), "number"),
          cell(share(p.goal_met_share), "number"),
          cell(String(p.queued), "number"),
          cell(String(p.promoted), "number"),
        ],
        { "data-service-class": p.service_class, "data-period": String(p.period) },
      ),
    ),
  );
  fill("performance", rows, "No goal evaluation yet (the first comes within seconds of the first ended request).");
}

async function liveResourceGroups() {
  const groups = (await api("/v1/resource-groups")).items;
  const rows = groups.map((g) =>
    row(
      [
        cell(g.name),
        cell(g.service_classes.join(", ") || "–"),
        cell(String(g.in_flight), "number"),
        cell(g.max_in_flight === null ? "–" : String(g.max_in_flight), "number"),
        cell(g.min_in_flight === null ? "–" : String(g.min_in_flight), "number"),
        cell(`${number(g.capped_seconds, 1)} s`, "number"),
      ],
      { "data-resource-group": g.name },
    ),
  );
  fill("resource-groups", rows, "No resource groups in the active policy.");
}

// Dead letters, each with its retry and discard (an operator's key: a viewer's is refused, and told so).

function actionButton(label, onClick) {
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.addEventListener("click", onClick);
  return button;
}

async function deadLetterAction(token, verb, request) {
  try {
    await api(`/v1/dead-letters/${encodeURIComponent(token)}${request.suffix ?? ""}`, request);
    $("dead-letters-error").textContent = "";
  } catch (error) {
    if (error.status === 401) return;
    $("dead-letters-error").textContent = `Could not ${verb} ${token}: ${error.message}`;
  }
  await refreshLive();
}

async function liveDeadLetters() {
  const page = await api(`/v1/dead-letters?limit=${DEAD_LETTERS_SHOWN}`);
  const rows = page.items.map((d) => {
    const actions = document.createElement("td");
    actions.append(
      actionButton("Retry", () => deadLetterAction(d.token, "retry", { method: "POST", suffix: ":retry", body: { position: "back" } })),
      actionButton("Discard", () => deadLetterAction(d.token, "discard", { method: "DELETE" })),
    );
    return row(
      [
        cell(new Date(d.died_at).toLocaleString()),
        cell(d.token),
        cell(d.application_environment),
        cell(d.service_class),
        cell(d.reason),
        cell(String(d.deliveries), "number"),
        cell(d.error ?? "–"),
        actions,
      ],
      { "data-token": d.token },
    );
  });
  fill("dead-letters", rows, "No dead letters.");
  $("dead-letters-count").textContent = page.next_cursor ? `(the ${DEAD_LETTERS_SHOWN} oldest)` : `(${page.items.length})`;
}

async function activePolicy() {
  try {
    return await api("/v1/policy");
  } catch (error) {
    if (error.status === 404) return null;
    throw error;
  }
}

async function refreshLive() {
  clearTimeout(liveTimer);
  try {
    const policy = await activePolicy();
    classOrder = policy === null ? [] : policy.definition.service_classes.map((sc) => sc.name.toUpperCase());
    await Promise.all([liveEnvironments(), livePerformance(policy), liveResourceGroups(), liveDeadLetters()]);
    $("live-error").textContent = "";
    $("live-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    if (error.status === 401) return;
    $("live-error").textContent = `Could not refresh: ${error.message}`;
  }
  liveTimer = setTimeout(refreshLive, LIVE_REFRESH_MS);
}

// ---------------------------------------------------------------------------------------------------------------
// Live trends: each refresh's PI, servers (connected and wanted) and waiting requests per class, kept in this page
// for the last TREND_SECONDS and drawn for one environment
// ---------------------------------------------------------------------------------------------------------------

function recordTrends(environments, servers) {
  const now = Date.now() / 1000;
  environments.forEach((ae, index) => {
    const samples = trends.get(ae.name) ?? [];
    samples.push({
      t: now,
      pi: ae.performance ?? {},
      queued: ae.queued,
      wanted: servers[index]?.wanted ?? {},
      connected: servers[index]?.connected ?? {},
    });
    while (samples.length && samples[0].t < now - TREND_SECONDS) samples.shift();
    trends.set(ae.name, samples);
  });
  for (const name of trends.keys()) {
    if (!environments.some((ae) => ae.name === name)) trends.delete(name);
  }
  const select = $("trend-environment");
  const busy = environments.find((ae) => ae.servers || ae.queued_total) ?? environments[0];
  const chosen = trends.has(select.value) ? select.value : busy?.name;
  options(select, environments.map((ae) => ({ value: ae.name, label: ae.name })));
  if (chosen) select.value = chosen;
}

// The classes worth a line: those that had servers, wanted some or had work waiting in the kept samples.
function activeClasses(samples) {
  const seen = samples.flatMap((s) => [s.queued, s.wanted, s.connected].flatMap((counts) => Object.keys(counts).filter((name) => counts[name] > 0)));
  return orderedClasses(seen);
}

function classColor(name) {
  const index = classOrder.indexOf(name);
  return PALETTE[(index >= 0 ? index : classOrder.length) % PALETTE.length];
}

function timeTicks(from, to) {
  const step = TREND_TICK_STEPS.find((s) => (to - from) / s <= TREND_TICKS) ?? TREND_TICK_STEPS[TREND_TICK_STEPS.length - 1];
  const ticks = [];
  for (let value = Math.ceil(from / step) * step; value <= to; value += step) {
    ticks.push({ value, label: new Date(value * 1000).toLocaleTimeString([], { hourCycle: "h23", hour: "2-digit", minute: "2-digit", second: "2-digit" }) });
  }
  return ticks;
}

function trendSeries(samples, name, { figure, value, dashed = false, label = name }) {
  return {
    key: `${name}${dashed ? " wanted" : ""}`,
    label,
    color: classColor(name),
    dashed,
    points: samples.map((s) => {
      const y = value(s);
      return {
        x: s.t,
        y,
        title: `${label} at ${new Date(s.t * 1000).toLocaleTimeString()}: ${y === null ? "unknown" : number(y, figure === "pi" ? 2 : 0)}`,
        attributes: { "data-service-class": name, "data-t": s.t.toFixed(1) },
      };
    }),
  };
}

function drawTrends() {
  const name = $("trend-environment").value;
  const samples = trends.get(name) ?? [];
  const classes = activeClasses(samples);
  $("trends-message").textContent = classes.length ? "" : "No work and no servers in this environment yet.";
  $("trends").hidden = classes.length === 0;
  if (!classes.length) return;
  const to = samples[samples.length - 1].t;
  const from = Math.min(samples[0].t, to - LIVE_REFRESH_MS / 1000);
  const axes = {
    xDomain: [from, to],
    xStep: (TREND_GAP_REFRESHES * LIVE_REFRESH_MS) / 1000,
    xTicks: timeTicks(from, to),
    xLabel: "time",
    size: TREND_SIZE,
    pointRadius: 2,
  };
  lineChart($("trend-pi").querySelector("svg.chart"), {
    ...axes,
    series: classes.map((c) => trendSeries(samples, c, { figure: "pi", value: (s) => s.pi[c] ?? null })),
    yLabel: "performance index",
    yCap: PI_CHART_CAP,
    reference: { value: 1, label: "PI = 1 (goal)" },
  });
  lineChart($("trend-servers").querySelector("svg.chart"), {
    ...axes,
    series: classes.flatMap((c) => [
      trendSeries(samples, c, { figure: "servers", value: (s) => s.connected[c] ?? 0, label: `${c} connected` }),
      trendSeries(samples, c, { figure: "servers", value: (s) => s.wanted[c] ?? 0, dashed: true, label: `${c} wanted` }),
    ]),
    yLabel: "servers",
    integers: true,
  });
  lineChart($("trend-queued").querySelector("svg.chart"), {
    ...axes,
    series: classes.map((c) => trendSeries(samples, c, { figure: "queued", value: (s) => s.queued[c] ?? 0 })),
    yLabel: "requests waiting",
    integers: true,
  });
  $("trends-legend").replaceChildren(...classes.map((c) => legendEntry(c, classColor(c))));
}

// ---------------------------------------------------------------------------------------------------------------

onUnauthorized(askForKey);
$("key-form").addEventListener("submit", connect);
$("forget-key").addEventListener("click", () => askForKey());
$("trend-environment").addEventListener("change", drawTrends);

if (sessionStorage.getItem(KEY_STORAGE)) {
  api("/v1/whoami").then(start, (error) => error.status !== 401 && askForKey(error.message));
} else {
  askForKey();
}
