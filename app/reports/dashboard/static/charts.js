// SVG charts drawn by hand: a line chart (PI across the day) and a bar chart (the response time distribution).
// Every mark carries its value in data-* attributes and a <title>, so it can be read by people and by tests.

const SVG_NS = "http://www.w3.org/2000/svg";
const WIDTH = 720;
const HEIGHT = 340;
const MARGIN = { top: 16, right: 16, bottom: 64, left: 56 };
const PLOT_WIDTH = WIDTH - MARGIN.left - MARGIN.right;
const PLOT_HEIGHT = HEIGHT - MARGIN.top - MARGIN.bottom;

// Okabe-Ito: told apart with the common kinds of colour blindness.
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];

function element(name, attributes = {}, text = null) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

function titled(node, text) {
  node.appendChild(element("title", {}, text));
  return node;
}

function reset(svg, label) {
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
  svg.setAttribute("aria-label", label);
  svg.appendChild(element("rect", { class: "background", x: 0, y: 0, width: WIDTH, height: HEIGHT }));
}

// Round numbers for an axis from 0 to at least `max`: steps of 1, 2 or 5 times a power of ten.
export function niceTicks(max, count = 5) {
  const span = max > 0 ? max : 1;
  const rough = span / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const ticks = [];
  for (let value = 0; value < span + step / 2; value += step) ticks.push(Number(value.toPrecision(12)));
  if (ticks[ticks.length - 1] < span) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
  return ticks;
}

function yAxis(svg, ticks, scaleY, label) {
  for (const tick of ticks) {
    const y = scaleY(tick);
    svg.appendChild(element("line", { class: "grid", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y, y2: y }));
    svg.appendChild(element("text", { class: "tick", x: MARGIN.left - 6, y: y + 4, "text-anchor": "end" }, String(tick)));
  }
  const middle = MARGIN.top + PLOT_HEIGHT / 2;
  svg.appendChild(element("text", { class: "axis-label", x: 14, y: middle, transform: `rotate(-90 14 ${middle})`, "text-anchor": "middle" }, label));
}

function xAxisLine(svg) {
  const y = MARGIN.top + PLOT_HEIGHT;
  svg.appendChild(element("line", { class: "axis", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y, y2: y }));
}

function xAxisLabel(svg, label) {
  svg.appendChild(element("text", { class: "axis-label", x: MARGIN.left + PLOT_WIDTH / 2, y: HEIGHT - 8, "text-anchor": "middle" }, label));
}

/**
 * series: [{key, label, color, points: [{x, y, title, attributes}]}], in order of x. A point with y null, or a step
 * in x longer than xStep, is a gap in its line: nothing is known there, so nothing is drawn.
 * Values above yCap are drawn at the cap (their title and data-value keep the real figure).
 */
export function lineChart(svg, { series, xDomain, xStep, xTicks, xLabel, yLabel, yCap, reference }) {
  reset(svg, `${yLabel} by ${xLabel}`);
  const values = series.flatMap((s) => s.points.map((p) => p.y)).filter((y) => y !== null);
  const top = Math.min(Math.max(reference ? reference.value * 1.2 : 0, ...values), yCap);
  const ticks = niceTicks(top);
  const yMax = ticks[ticks.length - 1];
  const scaleX = (x) => MARGIN.left + ((x - xDomain[0]) / (xDomain[1] - xDomain[0])) * PLOT_WIDTH;
  const scaleY = (y) => MARGIN.top + PLOT_HEIGHT - (Math.min(y, yMax) / yMax) * PLOT_HEIGHT;

  yAxis(svg, ticks, scaleY, yLabel);
  xAxisLine(svg);
  for (const tick of xTicks) {
    const x = scaleX(tick.value);
    svg.appendChild(element("line", { class: "axis", x1: x, x2: x, y1: MARGIN.top + PLOT_HEIGHT, y2: MARGIN.top + PLOT_HEIGHT + 5 }));
    svg.appendChild(element("text", { class: "tick", x, y: MARGIN.top + PLOT_HEIGHT + 20, "text-anchor": "middle" }, tick.label));
  }
  xAxisLabel(svg, xLabel);

  if (reference) {
    const y = scaleY(reference.value);
    svg.appendChild(element("line", { class: "reference", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y, y2: y }));
    svg.appendChild(element("text", { class: "reference-label", x: WIDTH - MARGIN.right - 4, y: y - 5, "text-anchor": "end" }, reference.label));
  }

  for (const one of series) {
    const group = element("g", { class: "series", "data-series": one.key });
    let path = "";
    let previous = null;
    for (const point of one.points) {
      const joined = previous !== null && previous.y !== null && point.x - previous.x <= xStep;
      if (point.y !== null) path += `${joined ? "L" : "M"}${scaleX(point.x).toFixed(1)},${scaleY(point.y).toFixed(1)}`;
      previous = point;
    }
    group.appendChild(element("path", { class: "line", d: path, stroke: one.color }));
    for (const point of one.points.filter((p) => p.y !== null)) {
      const mark = element("circle", { class: "point", cx: scaleX(point.x), cy: scaleY(point.y), r: 3, fill: one.color, "data-value": point.y, ...point.attributes });
      group.appendChild(titled(mark, point.title));
    }
    svg.appendChild(group);
  }
}

/** bars: [{label, value, tone, title}]; marker: {after: index, label} draws a dashed line after that bar. */
export function barChart(svg, { bars, xLabel, yLabel, marker }) {
  reset(svg, `${yLabel} by ${xLabel}`);
  const ticks = niceTicks(Math.max(...bars.map((b) => b.value), 1));
  const yMax = ticks[ticks.length - 1];
  const slot = PLOT_WIDTH / bars.length;
  const scaleY = (y) => MARGIN.top + PLOT_HEIGHT - (y / yMax) * PLOT_HEIGHT;

  yAxis(svg, ticks, scaleY, yLabel);
  bars.forEach((bar, index) => {
    const x = MARGIN.left + index * slot;
    const y = scaleY(bar.value);
    const rect = element("rect", {
      class: `bar ${bar.tone}`, x: x + slot * 0.15, y, width: slot * 0.7, height: MARGIN.top + PLOT_HEIGHT - y,
      "data-label": bar.label, "data-value": bar.value,
    });
    svg.appendChild(titled(rect, bar.title));
    if (bar.value > 0) svg.appendChild(element("text", { class: "bar-value", x: x + slot / 2, y: y - 4, "text-anchor": "middle" }, String(bar.value)));
    const labelY = MARGIN.top + PLOT_HEIGHT + 14;
    svg.appendChild(element("text", { class: "tick", x: x + slot / 2, y: labelY, "text-anchor": "end", transform: `rotate(-35 ${x + slot / 2} ${labelY})` }, bar.label));
  });
  xAxisLine(svg);
  xAxisLabel(svg, xLabel);

  if (marker) {
    const x = MARGIN.left + (marker.after + 1) * slot;
    svg.appendChild(element("line", { class: "reference", x1: x, x2: x, y1: MARGIN.top, y2: MARGIN.top + PLOT_HEIGHT }));
    svg.appendChild(element("text", { class: "reference-label", x: x + 4, y: MARGIN.top + 12 }, marker.label));
  }
}
