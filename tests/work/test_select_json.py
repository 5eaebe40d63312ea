"""A select's answer writes each payload as the JSON text it was stored as, and everything else exactly as pydantic
would serialize the same answer."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from app.work.router import _select_json
from app.work.schemas import EndedOut, EndErrorOut, SelectOut, WorkItemOut

PAYLOADS = [{"n": 1}, {"text": "Grüße, 東京 \u2028 \"quoted\"", "nested": {"list": [1, 2.5, None, True], "empty": {}}}, [], "plain", 0, None,
            {"big": 2**63 - 1, "float": 1e-7, "neg": -0.0}]  # fmt: skip
TIMES = [
    datetime(2026, 11, 25, 9, 30, tzinfo=UTC),
    datetime(2026, 11, 25, 9, 30, 1, 123000, tzinfo=UTC),
    datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
]


def _item(payload: object, inserted: datetime, **fields: object) -> dict[str, object]:
    return {"token": "EAST~PAYROLL~abc", "service_class": "ONLINE", "report_class": None, "payload": payload, "userid": "ATM01",
            "enclave": None, "state": "begun", "deliveries": 1, "inserted_at": inserted, "lease_expires_at": TIMES[1]} | fields  # fmt: skip


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("inserted", TIMES)
def test_the_answer_is_pydantic_s_with_the_payload_as_stored(payload, inserted):
    stored = orjson.dumps(payload).decode()  # as the insert stores it
    ended = [EndedOut(token="EAST~PAYROLL~x", outcome="completed", response_time_ms=12)]
    errors = [EndErrorOut(token="EAST~PAYROLL~y", code="not_holder", message="its lease expired")]
    fast = SelectOut.model_construct(
        items=[WorkItemOut.model_construct(**_item(orjson.Fragment(stored), inserted))], ended=ended, end_errors=errors,
        terminate=False, reason_code=None, reason=None,
    )  # fmt: skip
    validated = SelectOut(items=[WorkItemOut(**_item(orjson.loads(stored), inserted))], ended=ended, end_errors=errors)
    assert _select_json(fast).body == validated.__pydantic_serializer__.to_json(validated)


def test_a_terminating_answer_is_pydantic_s():
    answer = SelectOut(items=[], ended=[], end_errors=[], terminate=True, reason_code="0C14", reason="the environment is QUIESCED")
    assert _select_json(answer).body == answer.__pydantic_serializer__.to_json(answer)
