// The what-if view: a recorded day replayed under a candidate policy (the active one, a stored version, or one pasted)
// by POST /v1/reports/what-if; the run's state and progress read until it ends (GET), its cancel (DELETE), and its
// result: predicted against recorded per class period, with the class periods whose attainment would fall flagged as
// the result flags them (`falls`: what `wlm whatif` prints as FALLS). The service allows what-if runs to operators
// only: a viewer's key is told so, and nothing of them is asked.
import { PALETTE, dayPiChart, legendEntry } from "./charts.js";
import { $, api, cell, fill, number, options, piCell, row, share } from "./common.js";

const WHAT_IF = "/v1/reports/what-if";
// The run this tab follows, kept across a reload: it goes on in the service either way.
const RUN_STORAGE = "wlm.whatIfRun";
const POLL_MS = 1000;
const UNDER_WAY = ["queued", "running"];
const VERSIONS_LISTED = 100;
const WHOLE_DAY_MINUTES = 1440;
// Each class period is drawn twice in its colour: the replay's line solid, the recorded day's dashed.
const SIDES = [
  { side: "predicted", figures: "predicted", dashed: false },
  { side: "recorded", figures: "actual", dashed: true },
];

let followed = null; // the id of the run shown
let reads = 0; // counts the reads of the run: an answer to an older one than the last is dropped
let pollTimer = null;
let shown = null; // the result shown

export function startWhatIf(who) {
  reset();
  const allowed = who.roles.includes("operator") || who.roles.includes("admin");
  $("whatif-access").hidden = allowed;
  $("whatif-form").hidden = !allowed;
  if (!allowed) {
    $("whatif-access").textContent = "What-if runs take an operator's key: sign in with one to replay a recorded day under a candidate policy.";
    return;
  }
  loadChoices();
  const kept = Number(sessionStorage.getItem(RUN_STORAGE));
  if (kept) follow(kept);
}

export function stopWhatIf() {
  reads += 1;
  clearTimeout(pollTimer);
  followed = null;
}

function reset() {
  stopWhatIf();
  shown = null;
  $("whatif-result").hidden = true;
  $("whatif-state").textContent = "";
  delete $("whatif-state").dataset.state;
  $("whatif-cancel").hidden = true;
  $("whatif-start").disabled = false;
  showError(null);
}

// ---------------------------------------------------------------------------------------------------------------
// What to run: the day and the candidate
// ---------------------------------------------------------------------------------------------------------------

async function loadChoices() {
  try {
    const [days, versions] = await Promise.all([api(`${WHAT_IF}/dates`), api(`/v1/policy/versions?limit=${VERSIONS_LISTED}`)]);
    showDays(days.items);
    showCandidates(versions.items);
  } catch (error) {
    if (error.status !== 401) showError(error, "Could not list the recorded days and the policy versions");
  }
}

function showDays(days) {
  $("whatif-days").replaceChildren(
    ...days.map((day) => {
      const option = document.createElement("option");
      option.value = day;
      return option;
    }),
  );
  if (!$("whatif-date").value && days.length) $("whatif-date").value = days[0];
  $("whatif-days-hint").textContent = days.length
    ? `${days.length} recorded day${days.length > 1 ? "s" : ""}, the newest ${days[0]}: the day's list offers them.`
    : "No work records to replay yet: the service records each request its server ends.";
}

// The active policy (the newest version), the older versions, or a definition pasted.
function showCandidates(versions) {
  const [active, ...older] = versions;
  const choices = [];
  if (active) choices.push({ value: "active", label: `the active policy (v${active.version} ${active.name})` });
  for (const v of older) {
    choices.push({ value: `version:${v.version}`, label: `v${v.version} ${v.name}, installed ${v.installed_at.slice(0, 10)} by ${v.installed_by}` });
  }
  choices.push({ value: "pasted", label: "a definition pasted below (YAML or JSON)" });
  options($("whatif-candidate"), choices);
  showPasted();
}

function showPasted() {
  const pasted = $("whatif-candidate").value === "pasted";
  $("whatif-pasted-label").hidden = !pasted;
  $("whatif-pasted").required = pasted;
}

// The candidate as the API takes it: a stored definition as it is, a pasted one as its text.
async function candidatePolicy() {
  const choice = $("whatif-candidate").value;
  if (choice === "pasted") return $("whatif-pasted").value;
  const stored = await api(choice === "active" ? "/v1/policy" : `/v1/policy/versions/${choice.slice("version:".length)}`);
  return stored.definition;
}

async function submit(event) {
  event.preventDefault();
  showError(null);
  const body = { date: $("whatif-date").value };
  const environment = $("whatif-environment").value.trim().toUpperCase();
  if (environment) body.environment = environment;
  try {
    body.policy = await candidatePolicy();
    const accepted = await api(WHAT_IF, { method: "POST", body });
    follow(accepted.id);
  } catch (error) {
    if (error.status !== 401) showError(error);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The run: its state and progress until it ends, and its cancel
// ---------------------------------------------------------------------------------------------------------------

function follow(id) {
  reset();
  followed = id;
  sessionStorage.setItem(RUN_STORAGE, String(id));
  poll();
}

async function poll() {
  clearTimeout(pollTimer);
  const read = ++reads;
  const id = followed;
  let run;
  try {
    run = await api(`${WHAT_IF}/${id}`);
  } catch (error) {
    if (read !== reads || error.status === 401) return;
    if (error.status === 404) {
      // Runs are forgotten after WLM_WHATIF_RETENTION_DAYS.
      sessionStorage.removeItem(RUN_STORAGE);
      $("whatif-state").textContent = `What-if run ${id} is no longer kept.`;
      return;
    }
    showError(error, `Could not read what-if run ${id}`);
    pollTimer = setTimeout(poll, 5 * POLL_MS);
    return;
  }
  if (read !== reads) return;
  showRun(run);
  if (UNDER_WAY.includes(run.state)) pollTimer = setTimeout(poll, POLL_MS);
}

function showRun(run) {
  const underWay = UNDER_WAY.includes(run.state);
  let text = `What-if run ${run.id} of ${run.date}${run.environment ? ` (${run.environment} only)` : ""}: ${run.state}`;
  if (run.state === "queued") text += ", waiting its turn (runs go one at a time)";
  if (run.state === "running") {
    const seconds = Math.max(0, Math.round((Date.now() - Date.parse(run.started_at)) / 1000));
    text += ` for ${seconds} s${run.progress ? `: ${run.progress}` : ""}`;
  }
  $("whatif-state").textContent = text;
  if (run.state === "failed") showProblem(`What-if run ${run.id} failed: ${run.error ?? "no reason given"}`);
  $("whatif-state").dataset.state = run.state;
  $("whatif-cancel").hidden = !underWay;
  $("whatif-start").disabled = underWay;
  if (run.state === "done" && shown === null) showResult(run.result);
}

async function cancel() {
  const id = followed;
  if (id === null) return;
  try {
    const run = await api(`${WHAT_IF}/${id}`, { method: "DELETE" });
    stopWhatIf();
    followed = id;
    showRun(run);
  } catch (error) {
    if (error.status === 401) return;
    if (error.code === "run_finished") poll(); // it ended meanwhile: show how
    else showError(error, `Could not cancel what-if run ${id}`);
  }
}

// A refusal as its reader needs it: what was wrong and what to do, with the fields at fault listed.
function showError(error, context = "The what-if was refused") {
  if (error === null) showProblem("");
  else showProblem(explain(error, context), error.code === "validation_failed" ? (error.details.errors ?? []) : []);
}

function showProblem(text, fields = []) {
  const [message, list] = $("whatif-error").children;
  message.textContent = text;
  list.replaceChildren(
    ...fields.map((field) => {
      const item = document.createElement("li");
      item.textContent = `${field.path}: ${field.message}`;
      return item;
    }),
  );
}

function explain(error, context) {
  switch (error.code) {
    case "validation_failed":
      return `${context}: these fields are not valid (the policy install would refuse the candidate the same way); nothing ran.`;
    case "no_records":
      return `${context}: there are no work records of ${error.details.date}, so nothing to replay; pick a recorded day.`;
    case "spark_unavailable":
      return `${context}: Spark is not available where the service runs (${error.message}).`;
    case "forbidden":
      return `${context}: what-if runs take an operator's key.`;
    default:
      return `${context}: ${error.message}${error.code ? ` (${error.code})` : ""}.`;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The result: predicted against recorded per class period, and the PI across the day of one environment
// ---------------------------------------------------------------------------------------------------------------

const classPeriod = (item) => `${item.service_class} period ${item.period}`;

function showResult(result) {
  shown = result;
  const items = result.environments.flatMap((environment) =>
    environment.summary.map((item) => ({ environment: environment.application_environment, ...item })),
  );
  const falling = items.filter((item) => item.falls);
  const verdict = $("whatif-verdict");
  const named = falling.map((item) => `${item.environment} ${classPeriod(item)}`).join(", ");
  verdict.textContent = falling.length
    ? `Under ${result.policy_name}, ${falling.length} class period${falling.length > 1 ? "s" : ""} would meet the goal in fewer intervals than recorded: ${named}.`
    : `Under ${result.policy_name}, no class period would meet its goal in fewer intervals than recorded.`;
  verdict.classList.toggle("falls", falling.length > 0);
  fill("whatif-summary", items.map(summaryRow), "Nothing replayed.");
  const names = result.environments.map((environment) => environment.application_environment);
  options($("whatif-chart-environment"), names.map((name) => ({ value: name, label: name })));
  drawChart();
  $("whatif-assumptions").replaceChildren(
    ...result.assumptions.map((assumption) => {
      const item = document.createElement("li");
      item.textContent = assumption;
      return item;
    }),
  );
  $("whatif-result").hidden = false;
}

function summaryRow(item) {
  const attributes = { "data-environment": item.environment, "data-service-class": item.service_class, "data-period": String(item.period) };
  return row(
    [
      cell(item.environment),
      cell(item.service_class),
      cell(String(item.period), "number"),
      piCell(item.predicted_pi),
      piCell(item.actual_pi),
      cell(share(item.predicted_attainment), "number"),
      cell(share(item.actual_attainment), "number"),
      cell(number(item.predicted_servers, 1), "number"),
      cell(number(item.actual_servers, 1), "number"),
      cell(number(item.predicted_server_seconds), "number"),
      cell(number(item.actual_server_seconds), "number"),
      cell(item.falls ? "falls" : "", item.falls ? "falls" : ""),
    ],
    item.falls ? { ...attributes, class: "falls", "data-falls": "" } : attributes,
  );
}

function drawChart() {
  const environment = shown.environments.find((e) => e.application_environment === $("whatif-chart-environment").value);
  if (!environment) return;
  const figure = $("whatif-pi-chart");
  const dayStart = Date.parse(`${shown.date}T00:00:00Z`);
  const intervals = (rows) => rows.filter((r) => r.interval_minutes !== WHOLE_DAY_MINUTES);
  const minutes = intervals(environment.predicted.classes)[0]?.interval_minutes ?? 15;
  const colours = environment.summary.map((_, index) => PALETTE[index % PALETTE.length]);
  const series = environment.summary.flatMap((item, index) =>
    SIDES.map(({ side, figures, dashed }) => {
      const label = `${classPeriod(item)} ${side}`;
      const rows = intervals(environment[figures].classes).filter((r) => r.service_class === item.service_class && r.period === item.period);
      const points = rows.map((r) => {
        const minute = (Date.parse(r.interval_start) - dayStart) / 60000;
        return {
          x: minute,
          y: r.performance_index,
          title: `${label} ${r.interval_start.slice(11, 16)}: PI ${number(r.performance_index, 2)}, ${r.ended_count} ended`,
          attributes: { "data-service-class": item.service_class, "data-period": item.period, "data-side": side, "data-minute": minute },
        };
      });
      return { key: `${item.service_class}|${item.period}|${side}`, label, color: colours[index], dashed, points };
    }),
  );
  dayPiChart(figure.querySelector("svg.chart"), series, minutes);
  figure.querySelector(".legend").replaceChildren(...environment.summary.map((item, index) => legendEntry(classPeriod(item), colours[index])));
  const replay = environment.replay;
  let caption = `${environment.application_environment}: ${environment.arrivals} requests replayed; servers the replay started: ${replay.servers_started}, retired: ${replay.servers_retired}`;
  if (replay.unended) caption += `; requests not ended by the day's end: ${replay.unended}`;
  if (!environment.defined_by_candidate) caption += "; the candidate does not define this environment (default server limits)";
  figure.querySelector(".caption").textContent = `${caption}.`;
}

$("whatif-form").addEventListener("submit", submit);
$("whatif-candidate").addEventListener("change", showPasted);
$("whatif-cancel").addEventListener("click", cancel);
$("whatif-chart-environment").addEventListener("change", drawChart);
