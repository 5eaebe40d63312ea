"""The lifecycle's answers, written by orjson from plain dataclasses, are byte for byte what pydantic writes for the
same types (the API's documented schema), except that a selected payload is the JSON text it was stored as."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import orjson
import pytest
from pydantic import TypeAdapter

from app.work.router import _json
from app.work.schemas import EndedOut, EndErrorOut, SelectOut, WorkBatchQueued, WorkItemOut, WorkQueued

PAYLOADS = [{"n": 1}, {"text": "Grüße, 東京 \u2028 \"quoted\"", "nested": {"list": [1, 2.5, None, True], "empty": {}}},
            [], "plain", 0, None,
            {"big": 2**63 - 1, "float": 1e-7, "neg": -0.0}]  # fmt: skip
TIMES = [
    datetime(2026, 11, 25, 9, 30, tzinfo=UTC),
    datetime(2026, 11, 25, 9, 30, 1, 123000, tzinfo=UTC),
    datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
]


def _pydantic(answer: object) -> bytes:
    return TypeAdapter(type(answer)).dump_json(answer)


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("inserted", TIMES)
def test_a_select_s_answer_is_pydantic_s_with_the_payload_as_stored(payload, inserted):
    stored = orjson.dumps(payload).decode()  # as the insert stores it
    item = WorkItemOut("EAST~PAYROLL~abc", "ONLINE", None, orjson.Fragment(stored), "ATM01", None, "begun", 1, inserted, TIMES[1])
    answer = SelectOut(
        items=[item],
        ended=[EndedOut(token="EAST~PAYROLL~x", outcome="completed", response_time_ms=12)],
        end_errors=[EndErrorOut(token="EAST~PAYROLL~y", code="not_holder", message="its lease expired")],
    )
    decoded = replace(answer, items=[replace(item, payload=orjson.loads(stored))])
    assert _json(answer).body == _pydantic(decoded)


def test_the_other_answers_are_pydantic_s():
    queued = WorkQueued(token="EAST~PAYROLL~abc", application_environment="PAYROLL", node="EAST", service_class="ONLINE", report_class=None)
    for answer in (
        queued,
        WorkBatchQueued(items=[queued, replace(queued, report_class="ATMA")]),
        EndedOut(token="EAST~PAYROLL~x", outcome="failed", response_time_ms=0),
        SelectOut(items=[], terminate=True, reason_code="0C14", reason="the environment is QUIESCED"),
    ):
        assert _json(answer).body == _pydantic(answer)
