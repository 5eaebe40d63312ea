"""One environment's what-if (spark_jobs/what_if/replay.py), pure: which class each recorded request has under the
candidate, the replay's figures beside the recorded day's in the report's shape, the classes whose attainment
would fall, what is left out, and the same result for the same seed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spark_jobs.what_if.model import ManagerSettings
from spark_jobs.what_if.replay import KEY_COLUMNS, ReplayInputs, _Day, replay_environment, task_table
from tests.spark_jobs.what_if.records import MIDNIGHT, RECORDED, candidate, record, with_limits


def inputs(definition: dict[str, Any], *, latencies: tuple[float, ...] = (), seed: int = 0) -> ReplayInputs:
    return ReplayInputs(definition, {1: RECORDED}, MIDNIGHT, ManagerSettings(), latencies, seed)


def whole_day(rows: list[dict[str, Any]], service_class: str, period: int = 1) -> dict[str, Any]:
    [row] = [r for r in rows if r["interval_minutes"] == 1440 and r["service_class"] == service_class and r["period"] == period]
    return row


def summary_of(result: dict[str, Any], service_class: str) -> dict[str, Any]:
    [item] = [i for i in result["summary"] if i["service_class"] == service_class and i["period"] == 1]
    return item


# One ONLINE request every 10 s for ten minutes, 100 ms each, never queued; three BATCH requests of 2 s.
QUIET = [record("ONLINE", 10.0 * i, 100) for i in range(60)] + [record("BATCH", 100.0 * i, 2000, userid="CLERK") for i in range(1, 4)]


def test_under_its_own_policy_a_quiet_day_is_predicted_as_recorded() -> None:
    result = replay_environment("PAYROLL", QUIET, inputs(RECORDED))
    assert result["arrivals"] == 63
    assert result["kept_recorded_class"] == 63 and result["classified_from_recorded_qualifiers"] == 0
    predicted, actual = result["predicted"]["classes"], result["actual"]["classes"]
    for side in (predicted, actual):
        online = whole_day(side, "ONLINE")
        assert online["ended_count"] == 60
        # 100 ms of a 500 ms average goal (the replay's times are seconds: float noise below a microsecond)
        assert online["performance_index"] == pytest.approx(0.2)
        assert online["response_p90_ms"] == pytest.approx(100)
        assert sum(online["buckets"]) == 60 and online["buckets"][0] == 60  # all within 50% of the goal
        assert whole_day(side, "BATCH")["ended_count"] == 3
    # The replay had servers (min 2, connected at the first decision); the records have none.
    assert whole_day(predicted, "ONLINE")["server_seconds"] > 0
    assert whole_day(actual, "ONLINE")["server_seconds"] is None
    [day_total] = [row for row in result["predicted"]["environment"] if row["interval_minutes"] == 1440]
    assert day_total["servers_connected"] >= 2 * 0.99  # two servers all day (min 2)
    assert result["replay"]["servers_started"] >= 2 and result["replay"]["unended"] == 0
    online = summary_of(result, "ONLINE")
    assert online["predicted_attainment"] == online["actual_attainment"] == 1.0
    assert not online["falls"]
    # The summary carries each side's whole-day servers: the replay's, none recorded.
    online_day = whole_day(predicted, "ONLINE")
    assert online["predicted_servers"] == online_day["servers_connected"] and online["predicted_servers"] > 0
    assert online["predicted_server_seconds"] == online_day["server_seconds"]
    assert online["actual_servers"] is None and online["actual_server_seconds"] is None
    # 15-minute rows: ONLINE's work fell in the first interval only.
    assert [r["interval_start"] for r in predicted if r["service_class"] == "ONLINE" and r["interval_minutes"] == 15 and r["had_work"]] == [
        MIDNIGHT.isoformat()
    ]


def test_rules_that_differ_classify_again_from_the_recorded_qualifiers() -> None:
    """The candidate sends userid ATM* to FAST: the ONLINE records (userid ATM1) go there; CLERK stays BATCH, its
    group's default."""
    moved = candidate(
        service_classes=[
            *RECORDED["service_classes"],
            {"name": "FAST", "importance": 1, "goal": {"type": "average", "response_time_ms": 200}},
        ],
        classification=[
            {
                "subsystem_type": "CB",
                "default_service_class": "BATCH",
                "rules": [{"qualifier": "UI", "value": "ATM*", "service_class": "FAST"}],
            }
        ],
    )
    result = replay_environment("PAYROLL", QUIET, inputs(moved))
    assert result["classified_from_recorded_qualifiers"] == 63 and result["kept_recorded_class"] == 0
    predicted = {row["service_class"] for row in result["predicted"]["classes"] if row["had_work"]}
    assert predicted == {"FAST", "BATCH"}
    assert whole_day(result["predicted"]["classes"], "FAST")["ended_count"] == 60
    # The recorded side keeps the recorded classes.
    assert whole_day(result["actual"]["classes"], "ONLINE")["ended_count"] == 60


def test_a_server_maximum_too_low_for_a_burst_is_flagged() -> None:
    """Twenty ONLINE requests of 400 ms at once, recorded as served at once. With one server they queue: the later
    ones wait seconds, far above the 500 ms average goal, so ONLINE's attainment falls."""
    burst = [record("ONLINE", 60.0, 400) for _ in range(20)]
    result = replay_environment("PAYROLL", burst, inputs(with_limits(RECORDED, min=1, max=1)))
    online = summary_of(result, "ONLINE")
    assert online["actual_pi"] == pytest.approx(0.8) and online["actual_attainment"] == 1.0
    assert online["predicted_pi"] > 1 and online["predicted_attainment"] == 0.0
    assert online["falls"]
    assert result["replay"]["servers_started"] == 1


def test_what_the_replay_leaves_out_is_counted() -> None:
    records = [
        record("ONLINE", 5.0),
        record("ONLINE", 6.0, outcome="deleted"),
        record("ONLINE", 7.0, outcome="abandoned"),
        record("ONLINE", -30.0),  # inserted the day before, ended on this one
        record("GONE", 8.0, userid="CLERK"),  # a class no recorded version defines
    ]
    result = replay_environment("PAYROLL", records, inputs(RECORDED))
    assert result["arrivals"] == 2
    assert result["left_out"] == {"not_ended_by_a_server": 2, "inserted_before_the_day": 1, "recorded_class_unknown": 1}
    # GONE is not in the candidate: classified again, from userid CLERK, as BATCH.
    assert result["classified_from_recorded_qualifiers"] == 1


def test_an_environment_the_candidate_does_not_define_replays_with_the_default_limits() -> None:
    result = replay_environment("DYNAMIC", QUIET[:5], inputs(RECORDED), worker_tasks=4)
    assert not result["defined_by_candidate"] and result["worker_tasks"] == 4
    # No start command: its servers come as the manager wants them, started by others (an autoscaler reading
    # desiredServers); the replay starts them alike.
    assert result["replay"]["servers_started"] >= 1 and result["replay"]["unended"] == 0


def test_the_same_seed_gives_the_same_result_and_another_may_not() -> None:
    burst = [record("ONLINE", 30.0 * i, 400) for i in range(40)] + [record("ONLINE", 600.0, 400) for _ in range(30)]
    given = inputs(with_limits(RECORDED, min=0, max=4), latencies=(1.0, 20.0, 60.0, 120.0), seed=7)
    first, second = replay_environment("PAYROLL", burst, given), replay_environment("PAYROLL", burst, given)
    assert json.dumps(first) == json.dumps(second)
    others = {
        json.dumps(
            replay_environment("PAYROLL", burst, inputs(with_limits(RECORDED, min=0, max=4), latencies=given.start_latencies_s, seed=s))
        )
        for s in range(8, 14)
    }
    assert len(others | {json.dumps(first)}) > 1


def test_a_task_numbers_each_distinct_key_once_in_the_order_first_seen_a_null_apart_from_empty_text() -> None:
    rows = [
        record("BATCH", 1.0, userid="CLERK"),
        record("ONLINE", 2.0),
        record("ONLINE", 3.0, userid=""),
        record("ONLINE", 4.0) | {"userid": None},
        record("BATCH", 5.0, userid="CLERK"),
        record("ONLINE", 6.0) | {"userid": None, "subsystem_name": None},
    ]
    day = _Day(inputs(RECORDED))
    for batch in task_table(rows).to_batches(3):  # a key first seen in one batch comes again in the next
        day.add(batch)
    service_class, subsystem_type, version, userid, subsystem_name = (rows[0][column] for column in KEY_COLUMNS)
    assert list(day.numbers) == [
        (service_class, subsystem_type, version, userid, subsystem_name),
        ("ONLINE", subsystem_type, version, "ATM1", subsystem_name),
        ("ONLINE", subsystem_type, version, "", subsystem_name),
        ("ONLINE", subsystem_type, version, None, subsystem_name),
        ("ONLINE", subsystem_type, version, None, None),
    ]
    assert len(day.arrivals) == 6
    assert day.candidate_class == [day.arrivals.class_index(name) for name in ("BATCH", "ONLINE", "ONLINE", "ONLINE", "ONLINE")]
