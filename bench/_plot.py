"""Shared by the benchmarks: a two-panel line chart drawn with Pillow (no plotting library): above, each system's
server count over the trace; below, a class's PI per interval on a log scale, with the goal (PI 1) drawn across and
an interval that missed with nothing ended (PI infinite) drawn on the top edge. The phases' bounds and names run
down both panels."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT = 1200, 820
LEFT, RIGHT, TOP, GAP, BOTTOM = 70, 20, 50, 70, 50
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
PI_RANGE = (0.05, 20.0)  # the lower panel's log scale; PIs outside are drawn on its edges


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow before 10.1: one bitmap size
        return ImageFont.load_default()


def chart(
    path: Path,
    title: str,
    length_s: float,
    phases: Sequence[tuple[str, float]],
    servers: Mapping[str, Sequence[tuple[float, int]]],
    pis: Mapping[str, Sequence[tuple[float, float]]],
    pi_label: str,
) -> None:
    """Write the chart to `path` (PNG). `phases`: (name, start s); `servers`: per system, (s, count) steps;
    `pis`: per system, (interval's middle s, PI)."""
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    font, small = _font(16), _font(13)
    panel_h = (HEIGHT - TOP - GAP - BOTTOM) // 2
    upper = (TOP, TOP + panel_h)
    lower = (TOP + panel_h + GAP, TOP + 2 * panel_h + GAP)

    def x_of(seconds: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * min(max(seconds, 0.0), length_s) / length_s

    top_count = max([count for steps in servers.values() for _, count in steps] + [1]) + 1

    def y_servers(count: float) -> float:
        return upper[1] - (upper[1] - upper[0]) * count / top_count

    low, high = math.log10(PI_RANGE[0]), math.log10(PI_RANGE[1])

    def y_pi(pi: float) -> float:
        value = high if math.isinf(pi) else min(max(math.log10(max(pi, 1e-9)), low), high)
        return lower[1] - (lower[1] - lower[0]) * (value - low) / (high - low)

    draw.text((LEFT, 12), title, fill="black", font=font)
    for top, bottom in (upper, lower):
        draw.rectangle((LEFT, top, WIDTH - RIGHT, bottom), outline="black")
    for name, start in phases:
        x = x_of(start)
        for top, bottom in (upper, lower):
            for y in range(int(top), int(bottom), 8):
                draw.line((x, y, x, min(y + 4, bottom)), fill="#999999")
        draw.text((x + 4, upper[0] + 4), name, fill="#555555", font=small)
    step = 30 if length_s > 120 else max(1, round(length_s / 8))
    for second in range(0, int(length_s) + 1, step):
        x = x_of(second)
        for bottom in (upper[1], lower[1]):
            draw.line((x, bottom, x, bottom + 5), fill="black")
            draw.text((x - 10, bottom + 8), f"{second}", fill="black", font=small)
    draw.text((WIDTH // 2 - 60, lower[1] + 28), "seconds into the trace", fill="black", font=small)
    for count in range(0, top_count + 1, max(1, top_count // 6)):
        draw.text((LEFT - 30, y_servers(count) - 7), str(count), fill="black", font=small)
    draw.text((LEFT, upper[0] - 20), "servers (processes alive; equal counts drawn side by side)", fill="black", font=small)
    for pi in (0.1, 0.5, 1, 2, 5, 10):
        draw.text((LEFT - 40, y_pi(pi) - 7), f"{pi:g}", fill="black", font=small)
        draw.line((LEFT, y_pi(pi), WIDTH - RIGHT, y_pi(pi)), fill="#000000" if pi == 1 else "#e5e5e5")
    draw.text((LEFT, lower[0] - 20), f"{pi_label} (log scale; top edge: a miss with nothing ended)", fill="black", font=small)
    for index, name in enumerate(servers):
        colour = COLOURS[index % len(COLOURS)]
        shift = 3 * (index - (len(servers) - 1) / 2)  # equal counts side by side rather than one over another
        line: list[tuple[float, float]] = []
        for second, count in servers[name]:
            if line:
                line.append((x_of(second), line[-1][1]))
            line.append((x_of(second), y_servers(count) + shift))
        if len(line) > 1:
            draw.line(line, fill=colour, width=2)
        points = [(x_of(second), y_pi(pi)) for second, pi in pis.get(name, ())]
        if len(points) > 1:
            draw.line(points, fill=colour, width=2)
        for x, y in points:
            draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=colour)
        legend_x = WIDTH - RIGHT - 150 * (len(servers) - index)
        draw.line((legend_x, 22, legend_x + 24, 22), fill=colour, width=3)
        draw.text((legend_x + 30, 14), name, fill="black", font=small)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
