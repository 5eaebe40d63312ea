"""Subject patterns (app/events/service.py): the grammar the OpenAPI document declares is the one the service reads."""

from __future__ import annotations

import re

import pytest

from app.events.service import SUBJECT_PATTERN, subject_matcher

SUBJECTS = [
    ">",
    "*",
    "WLM.INFO.SCHEDULER.>",
    "WLM.*.*.*.PAYROLL",
    "a_b-c.9",
    "*.>",
    "",
    ".",
    "WLM.",
    ".WLM",
    "WLM..X",
    ">.WLM",
    "WLM.>.X",
    "W*",
    "WLM\n",  # Python's `$` takes a trailing newline; the element must not
    "WLM.IN FO",
    "É",
]


def _accepted(subject: str) -> bool:
    try:
        subject_matcher(subject)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("subject", SUBJECTS)
def test_the_declared_pattern_accepts_what_the_service_accepts(subject: str) -> None:
    assert (re.fullmatch(SUBJECT_PATTERN, subject) is not None) == _accepted(subject)


def test_a_pattern_matches_by_element() -> None:
    assert subject_matcher("WLM.*.X.>").match("WLM.A.X.B.C") and not subject_matcher("WLM.*.X.>").match("WLM.A.B.X.C")
