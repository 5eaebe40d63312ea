"""`wlm demo`'s misses by cause (app/examples/demo_delays.py), pure: the spans of a class's PI above 1, each named by
the delay cause of the largest share over it, as the summary prints them."""

from __future__ import annotations

from app.examples.demo_delays import Miss, miss_lines, misses
from app.examples.demo_report import Moment

STARTING = {"servers_starting": 80.0, "no_server": 10.0}
QUIESCED = {"environment_state": 95.0}


def test_spans_of_pi_above_one_named_by_their_largest_cause() -> None:
    moments = [
        Moment(0, 3.0, {"no_server": 100.0}),
        Moment(5, 2.0, STARTING),
        Moment(10, 1.5, STARTING),
        Moment(20, 0.8, {}),
        Moment(25, None, None),  # not judged: not a miss
        Moment(90, 4.0, QUIESCED),
        Moment(100, 1.2, {"busy_higher": 30.0, "environment_state": 20.0}),
        Moment(105, 0.5, None),
        Moment(110, 1.1, {}),  # nothing waited for a cause
    ]
    assert misses(moments) == [Miss(0, 20, "servers_starting"), Miss(90, 105, "environment_state"), Miss(110, 110, None)]
    assert misses([]) == [] and misses([Moment(0, 1.0, QUIESCED)]) == []


def test_the_summary_names_each_class_s_misses() -> None:
    lines = miss_lines(
        {
            "ONLINE": [Moment(0, 2.0, STARTING), Moment(20, 0.9, {}), Moment(90, 3.0, QUIESCED), Moment(105, 1.0, {})],
            "BATCH": [Moment(0, 0.5, {})],
        }
    )
    assert lines[1:] == ["    ONLINE   missed 0:00-0:20 waiting for servers to start, 1:30-1:45 quiesced", "    BATCH    never missed"]
