"""What `wlm demo`'s summary tells of why a class missed its goal (pure): the spans of the demo in which its PI was
above 1, each named by the delay cause that held most of its waiting requests then, from the live delay samples each
snapshot read with the class's performance (its first period's `delay_pct` over the goal window), e.g. "ONLINE
missed 0:00-0:20 waiting for servers to start, 1:30-1:45 quiesced"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.examples.demo_report import Moment, clock

# Each cause as the summary says it, after "missed <span>".
CAUSE_WORDS = {
    "environment_state": "quiesced",
    "redelivery": "redelivering work",
    "group_cap": "at its resource group's cap",
    "no_server": "with no server",
    "servers_starting": "waiting for servers to start",
    "busy_higher": "its servers busy with work as important or more",
    "busy_lower": "its servers busy with less important work",
}


@dataclass(frozen=True, slots=True)
class Miss:
    start_s: float
    end_s: float
    cause: str | None  # the cause with the largest share over the span (None: no delay sampled)


def misses(moments: Sequence[Moment]) -> list[Miss]:
    """The spans of consecutive moments whose PI is above 1: from the first such moment to the next moment (or the
    last of them), named by the cause of the largest share summed over them."""
    found: list[Miss] = []
    run: list[Moment] = []
    for moment in [*moments, None]:
        if moment is not None and moment.pi is not None and moment.pi > 1:
            run.append(moment)
            continue
        if run:
            end = moment.at_s if moment is not None else run[-1].at_s
            found.append(Miss(run[0].at_s, end, _main_cause(run)))
            run = []
    return found


def _main_cause(run: Sequence[Moment]) -> str | None:
    totals: dict[str, float] = {}
    for moment in run:
        for cause, pct in (moment.delay_pct or {}).items():
            totals[cause] = totals.get(cause, 0.0) + pct
    if not totals:
        return None
    cause, share = max(totals.items(), key=lambda item: item[1])
    return cause if share > 0 else None


def miss_lines(timelines: Mapping[str, Sequence[Moment]]) -> list[str]:
    """The summary's lines: per class, its misses by time and cause."""
    lines = ["  misses by cause (PI > 1 at the progress lines; the cause most of its waiting requests had, from the delay samples):"]
    for name, moments in timelines.items():
        spans = [
            f"{clock(m.start_s)}-{clock(m.end_s)} {CAUSE_WORDS.get(m.cause, m.cause) if m.cause else 'with no delay sampled'}"
            for m in misses(moments)
        ]
        lines.append(f"    {name:<8} " + (f"missed {', '.join(spans)}" if spans else "never missed"))
    return lines
