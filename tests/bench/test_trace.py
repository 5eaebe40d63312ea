"""bench/_trace.py: the trace file bench/goals_vs_peers.py runs, its strict loader and its seeded arrivals."""

from __future__ import annotations

import copy
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _trace import Arrival, TraceError, arrivals, load, parse

TRACES = Path(__file__).resolve().parents[2] / "bench" / "traces"


def phase(length_s: float = 10, **rates: float) -> dict:
    classes = {
        "ONLINE": {"rate_per_s": 4, "service_time": {"type": "exponential", "mean_ms": 100},
                   "goal": {"type": "average", "response_time_ms": 500}, "importance": 1},
        "BATCH": {"rate_per_s": 1, "service_time": {"type": "fixed", "mean_ms": 1000},
                  "goal": {"type": "percentile", "percentile": 90, "response_time_ms": 5000}, "importance": 5},
    }  # fmt: skip
    for name, rate in rates.items():
        classes[name]["rate_per_s"] = rate
    return {"name": "p", "length_s": length_s, "classes": classes}


def refused(document: object) -> str:
    with pytest.raises(TraceError) as caught:
        parse(document)
    return str(caught.value)


def test_the_shipped_traces_load_with_three_classes_in_importance_order() -> None:
    default = load(TRACES / "default.json")
    assert default.length_s == 360
    assert [(c.name, c.importance) for c in default.classes.values()] == [("ONLINE", 1), ("REPORTS", 3), ("BATCH", 5)]
    assert [p.name for p in default.phases] == ["steady", "batch surge", "online surge", "steady again"]
    assert default.classes["REPORTS"].goal.as_policy() == {"type": "percentile", "percentile": 90, "response_time_ms": 1500}
    smoke = load(TRACES / "smoke.json")
    assert smoke.classes == default.classes and smoke.length_s == 4


def test_a_trace_round_trips_through_its_summary() -> None:
    trace = parse([phase(), phase(20, BATCH=0)])
    assert parse(trace.summary()) == trace
    assert trace.summary()[1]["classes"]["BATCH"]["rate_per_s"] == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d[1]["classes"]["BATCH"].update(rate_per_s=-1), "[1].classes.BATCH.rate_per_s"),
        (lambda d: d[0]["classes"]["ONLINE"].update(rate_per_s="4"), "[0].classes.ONLINE.rate_per_s"),
        (lambda d: d[0].update(length_s=0), "[0].length_s"),
        (lambda d: d[1].pop("length_s"), "[1].length_s: missing"),
        (lambda d: d[0].update(lenght_s=3), "[0].lenght_s: unknown field"),
        (lambda d: d[0]["classes"]["ONLINE"]["service_time"].update(type="normal"), "[0].classes.ONLINE.service_time.type"),
        (lambda d: d[0]["classes"]["ONLINE"]["service_time"].update(mean_ms=0), "[0].classes.ONLINE.service_time.mean_ms"),
        (lambda d: d[0]["classes"]["ONLINE"]["goal"].update(response_time_ms=0.5), "[0].classes.ONLINE.goal.response_time_ms"),
        (lambda d: d[0]["classes"]["ONLINE"]["goal"].update(type="velocity"), "[0].classes.ONLINE.goal.type"),
        (lambda d: d[0]["classes"]["BATCH"]["goal"].update(percentile=100), "[0].classes.BATCH.goal.percentile"),
        (lambda d: d[0]["classes"]["ONLINE"]["goal"].update(percentile=90), "[0].classes.ONLINE.goal.percentile: unknown field"),
        (lambda d: d[0]["classes"]["ONLINE"].update(importance=True), "[0].classes.ONLINE.importance"),
        (lambda d: d[0]["classes"]["ONLINE"].update(importance=6), "[0].classes.ONLINE.importance"),
        (lambda d: d[1]["classes"]["ONLINE"].update(importance=2), "[1].classes.ONLINE.importance: differs from phase 0's"),
        (lambda d: d[1]["classes"]["BATCH"]["goal"].update(percentile=95), "[1].classes.BATCH.goal: differs from phase 0's"),
        (lambda d: d[1]["classes"].pop("BATCH"), "[1].classes.BATCH: every phase names the same classes"),
        (lambda d: d[0]["classes"].update(online=d[0]["classes"].pop("ONLINE")), "[0].classes.online: a class name is upper case"),
        (lambda d: d[0].update(name=""), "[0].name"),
        (lambda d: d[0].update(classes={}), "[0].classes"),
    ],
)
def test_a_bad_field_is_refused_by_its_path(change, field: str) -> None:
    document = [phase(), phase()]
    change(document)
    assert refused(document).startswith(field)


def test_a_trace_is_a_non_empty_list_with_some_arrivals() -> None:
    assert refused({"phases": []}).startswith("(the document)")
    assert refused([]).startswith("(the document)")
    assert "no class has arrivals" in refused([phase(ONLINE=0, BATCH=0)])


def test_load_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([phase(BATCH=-1)]))
    with pytest.raises(TraceError, match=r"bad\.json: \[0\]\.classes\.BATCH\.rate_per_s: must be a number 0 or more, got -1"):
        load(bad)
    bad.write_text("[{")
    with pytest.raises(TraceError, match="not JSON"):
        load(bad)
    with pytest.raises(TraceError, match="cannot be read"):
        load(tmp_path / "absent.json")


def test_arrivals_are_seeded_sorted_inside_their_phase_and_at_the_rates() -> None:
    trace = parse([phase(100, ONLINE=5, BATCH=0), phase(100, ONLINE=0, BATCH=2)])
    first = arrivals(trace, 7)
    assert first == arrivals(trace, 7) and first != arrivals(trace, 8)
    assert [a.at_s for a in first] == sorted(a.at_s for a in first)
    assert all(a.at_s < 100 for a in first if a.service_class == "ONLINE")
    assert all(100 <= a.at_s < 200 for a in first if a.service_class == "BATCH")
    counts = Counter(a.service_class for a in first)
    assert 400 < counts["ONLINE"] < 600 and 150 < counts["BATCH"] < 250
    assert {a.service_ms for a in first if a.service_class == "BATCH"} == {1000}  # fixed
    online = [a.service_ms for a in first if a.service_class == "ONLINE"]
    assert 80 < sum(online) / len(online) < 120 and min(online) >= 1 and len(set(online)) > 50  # exponential, mean 100
    assert all(isinstance(a, Arrival) and isinstance(a.service_ms, int) for a in first)


def test_the_document_is_not_changed_by_parsing() -> None:
    document = [phase(), phase()]
    before = copy.deepcopy(document)
    parse(document)
    assert document == before
