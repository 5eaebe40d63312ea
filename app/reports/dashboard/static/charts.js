// SVG charts drawn by hand: line charts (PI across the day, live trends) and a bar chart (the response time
// distribution). Every mark carries its value in data-* attributes and a <title>, so it can be read by people and by
// tests.

const SVG_NS = "http://www.w3.org/2000/svg";
// The drawing's size in SVG units (it scales to its box); a smaller one draws its text larger relative to its marks.
export const FULL_SIZE = { width: 720, height: 340 };
const MARGIN = { top: 16, right: 16, bottom: 64, left: 56 };
// Line charts with ticks of one row need less room below than the bar chart's slanted labels.
const LINE_MARGIN = { ...MARGIN, bottom: 52 };

// Okabe-Ito: told apart with the common kinds of colour blindness.
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];
// A PI beyond this is drawn at the top of the chart; a velocity PI can reach 100 and would flatten every other line.
export const PI_CHART_CAP = 5;
const DAY_MINUTES = 1440;
const DAY_TICK_HOURS = [0, 3, 6, 9, 12, 15, 18, 21, 24];

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

// The drawing area of a chart of `size` with `margin` around its plot.
function frameOf(size, margin) {
  return { ...size, margin, plotWidth: size.width - margin.left - margin.right, plotHeight: size.height - margin.top - margin.bottom };
}

function reset(svg, frame, label) {
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${frame.width} ${frame.height}`);
  svg.setAttribute("aria-label", label);
  svg.appendChild(element("rect", { class: "background", x: 0, y: 0, width: frame.width, height: frame.height }));
}

// Round numbers for an axis from 0 to at least `max`: steps of 1, 2 or 5 times a power of ten (whole numbers only
// when `integers`).
export function niceTicks(max, count = 5, integers = false) {
  const span = max > 0 ? max : 1;
  const rough = Math.max(span / count, integers ? 1 : 0);
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const ticks = [];
  for (let value = 0; value < span + step / 2; value += step) ticks.push(Number(value.toPrecision(12)));
  if (ticks[ticks.length - 1] < span) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
  return ticks;
}

function yAxis(svg, frame, ticks, scaleY, label) {
  const { margin } = frame;
  for (const tick of ticks) {
    const y = scaleY(tick);
    svg.appendChild(element("line", { class: "grid", x1: margin.left, x2: frame.width - margin.right, y1: y, y2: y }));
    svg.appendChild(element("text", { class: "tick", x: margin.left - 6, y: y + 4, "text-anchor": "end" }, String(tick)));
  }
  const middle = margin.top + frame.plotHeight / 2;
  svg.appendChild(element("text", { class: "axis-label", x: 14, y: middle, transform: `rotate(-90 14 ${middle})`, "text-anchor": "middle" }, label));
}

function xAxisLine(svg, frame) {
  const y = frame.margin.top + frame.plotHeight;
  svg.appendChild(element("line", { class: "axis", x1: frame.margin.left, x2: frame.width - frame.margin.right, y1: y, y2: y }));
}

function xAxisLabel(svg, frame, label) {
  svg.appendChild(element("text", { class: "axis-label", x: frame.margin.left + frame.plotWidth / 2, y: frame.height - 8, "text-anchor": "middle" }, label));
}

/**
 * series: [{key, label, color, dashed, points: [{x, y, title, attributes}]}], in order of x. A point with y null, or a
 * step in x longer than xStep, is a gap in its line: nothing is known there, so nothing is drawn.
 * Values above yCap are drawn at the cap (their title and data-value keep the real figure). `integers`: whole-number
 * ticks (counts). `pointRadius`: the size of each point's mark.
 */
export function lineChart(
  svg,
  { series, xDomain, xStep, xTicks, xLabel, yLabel, yCap = Infinity, reference = null, integers = false, size = FULL_SIZE, pointRadius = 3 },
) {
  const frame = frameOf(size, LINE_MARGIN);
  const { margin } = frame;
  reset(svg, frame, `${yLabel} by ${xLabel}`);
  const values = series.flatMap((s) => s.points.map((p) => p.y)).filter((y) => y !== null);
  const top = Math.min(Math.max(reference ? reference.value * 1.2 : 0, ...values), yCap);
  const ticks = niceTicks(top, 5, integers);
  const yMax = ticks[ticks.length - 1];
  const scaleX = (x) => margin.left + ((x - xDomain[0]) / (xDomain[1] - xDomain[0] || 1)) * frame.plotWidth;
  const scaleY = (y) => margin.top + frame.plotHeight - (Math.min(y, yMax) / yMax) * frame.plotHeight;

  yAxis(svg, frame, ticks, scaleY, yLabel);
  xAxisLine(svg, frame);
  for (const tick of xTicks) {
    const x = scaleX(tick.value);
    svg.appendChild(element("line", { class: "axis", x1: x, x2: x, y1: margin.top + frame.plotHeight, y2: margin.top + frame.plotHeight + 5 }));
    svg.appendChild(element("text", { class: "tick", x, y: margin.top + frame.plotHeight + 20, "text-anchor": "middle" }, tick.label));
  }
  xAxisLabel(svg, frame, xLabel);

  if (reference) {
    const y = scaleY(reference.value);
    svg.appendChild(element("line", { class: "reference", x1: margin.left, x2: frame.width - margin.right, y1: y, y2: y }));
    svg.appendChild(element("text", { class: "reference-label", x: frame.width - margin.right - 4, y: y - 5, "text-anchor": "end" }, reference.label));
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
    group.appendChild(element("path", { class: one.dashed ? "line dashed" : "line", d: path, stroke: one.color }));
    for (const point of one.points.filter((p) => p.y !== null)) {
      const mark = element("circle", {
        class: "point", cx: scaleX(point.x), cy: scaleY(point.y), r: pointRadius, fill: one.color, "data-value": point.y, ...point.attributes,
      });
      group.appendChild(titled(mark, point.title));
    }
    svg.appendChild(group);
  }
}

/**
 * The PI of each series across a day of `intervalMinutes` intervals, with the PI = 1 line: each point's x is its
 * interval's start in minutes of the day. An interval without a point had no requests: its neighbours are not joined.
 */
export function dayPiChart(svg, series, intervalMinutes) {
  lineChart(svg, {
    series,
    xDomain: [0, DAY_MINUTES],
    xStep: intervalMinutes,
    xTicks: DAY_TICK_HOURS.map((h) => ({ value: h * 60, label: `${String(h).padStart(2, "0")}:00` })),
    xLabel: `time of day (UTC), ${intervalMinutes}-minute intervals`,
    yLabel: "performance index",
    yCap: PI_CHART_CAP,
    reference: { value: 1, label: "PI = 1 (goal)" },
  });
}

/** bars: [{label, value, tone, title}]; marker: {after: index, label} draws a dashed line after that bar. */
export function barChart(svg, { bars, xLabel, yLabel, marker }) {
  const frame = frameOf(FULL_SIZE, MARGIN);
  const { margin } = frame;
  reset(svg, frame, `${yLabel} by ${xLabel}`);
  const ticks = niceTicks(Math.max(...bars.map((b) => b.value), 1));
  const yMax = ticks[ticks.length - 1];
  const slot = frame.plotWidth / bars.length;
  const scaleY = (y) => margin.top + frame.plotHeight - (y / yMax) * frame.plotHeight;

  yAxis(svg, frame, ticks, scaleY, yLabel);
  bars.forEach((bar, index) => {
    const x = margin.left + index * slot;
    const y = scaleY(bar.value);
    const rect = element("rect", {
      class: `bar ${bar.tone}`, x: x + slot * 0.15, y, width: slot * 0.7, height: margin.top + frame.plotHeight - y,
      "data-label": bar.label, "data-value": bar.value,
    });
    svg.appendChild(titled(rect, bar.title));
    if (bar.value > 0) svg.appendChild(element("text", { class: "bar-value", x: x + slot / 2, y: y - 4, "text-anchor": "middle" }, String(bar.value)));
    const labelY = margin.top + frame.plotHeight + 14;
    svg.appendChild(element("text", { class: "tick", x: x + slot / 2, y: labelY, "text-anchor": "end", transform: `rotate(-35 ${x + slot / 2} ${labelY})` }, bar.label));
  });
  xAxisLine(svg, frame);
  xAxisLabel(svg, frame, xLabel);

  if (marker) {
    const x = margin.left + (marker.after + 1) * slot;
    svg.appendChild(element("line", { class: "reference", x1: x, x2: x, y1: margin.top, y2: margin.top + frame.plotHeight }));
    svg.appendChild(element("text", { class: "reference-label", x: x + 4, y: margin.top + 12 }, marker.label));
  }
}

// A legend's entry: a dot of the series' colour and its label.
export function legendEntry(label, color) {
  const entry = document.createElement("li");
  const swatch = element("svg", { viewBox: "0 0 12 12", class: "swatch" });
  swatch.appendChild(element("circle", { cx: 6, cy: 6, r: 5, fill: color }));
  entry.append(swatch, label);
  return entry;
}
