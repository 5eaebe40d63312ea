// What every part of the dashboard shares: the API calls with the key the user typed, and the helpers that put what
// the API returns into tables (as text only: nothing is parsed as HTML) and formats its figures.

export const KEY_STORAGE = "wlm.apiKey";

export const $ = (id) => document.getElementById(id);

// What a refused key does (the page asks for another): set by the page, called by `api` on a 401.
let unauthorized = () => {};

export function onUnauthorized(handler) {
  unauthorized = handler;
}

// A refusal: its HTTP status, and the error body's code and details (app/errors.py: {"error": {code, message, ...}}).
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code ?? null;
    this.details = body?.error ?? {};
  }
}

export async function api(path, { method = "GET", body: sent } = {}) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY_STORAGE)}`, Accept: "application/json" };
  if (sent !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: sent === undefined ? undefined : JSON.stringify(sent) });
  const body = await response.json().catch(() => null);
  if (response.status === 401) {
    unauthorized("The key was not accepted (unknown, revoked or expired); enter another.");
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

export function cell(text, className = "") {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

export function row(cells, attributes = {}) {
  const tr = document.createElement("tr");
  for (const [key, value] of Object.entries(attributes)) tr.setAttribute(key, value);
  tr.append(...cells);
  return tr;
}

// The table's rows, or a row saying there are none across the whole table (its first header row's columns).
export function fill(tableId, rows, emptyText) {
  const table = $(tableId);
  const body = table.tBodies[0];
  if (rows.length === 0) {
    const td = cell(emptyText, "empty");
    td.colSpan = [...table.tHead.rows[0].cells].reduce((columns, th) => columns + th.colSpan, 0);
    body.replaceChildren(row([td]));
  } else {
    body.replaceChildren(...rows);
  }
}

export function options(select, choices) {
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

export const number = (value, digits = 0) => (value === null || value === undefined ? "–" : value.toFixed(digits));
export const milliseconds = (value) => (value === null || value === undefined ? "–" : `${value.toFixed(value < 10 ? 1 : 0)} ms`);
export const share = (value) => (value === null || value === undefined ? "–" : `${(value * 100).toFixed(1)} %`);
const piClass = (pi) => (pi === null || pi === undefined ? "pi unknown" : pi <= 1 ? "pi met" : "pi missed");

export function piCell(pi) {
  return cell(number(pi, 2), `number ${piClass(pi)}`);
}

// A goal as the policy writes it: {type, response_time_ms, percentile, velocity}.
export function describeGoal(goal) {
  switch (goal.type) {
    case "average": return `average ${goal.response_time_ms} ms`;
    case "percentile": return `${goal.percentile} % within ${goal.response_time_ms} ms`;
    case "velocity": return `velocity ${goal.velocity}`;
    default: return "discretionary";
  }
}
