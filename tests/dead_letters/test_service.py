"""The list's order across places (pure): dead letters of several environments and nodes are listed by when they
died, then by token; a cursor taken in one place must cut every other place's dead letters at the same point."""

from __future__ import annotations

import pytest

from app.dead_letters.service import _place_after, parse_cursor
from app.errors import BadRequest

PLACES = ("N1~PAYROLL~", "N1~PAY~", "N2~PAYROLL~", "N10~A~")
IDS = ("a", "b", "ab", "z9")


def test_a_cursor_cuts_every_place_where_the_order_of_tokens_does() -> None:
    letters = [(died, place + request_id) for died in (5, 6) for place in PLACES for request_id in IDS]
    for cursor in letters:
        for place in PLACES:
            after = _place_after(cursor, place)
            assert after is not None
            kept = {(died, place + request_id) for died, token in letters if token.startswith(place) for request_id in [token[len(place):]]
                    if (died, request_id) > after}  # fmt: skip
            expected = {(died, token) for died, token in letters if token.startswith(place) and (died, token) > cursor}
            assert kept == expected, (cursor, place)


def test_no_cursor_keeps_everything_and_a_foreign_cursor_is_refused() -> None:
    assert _place_after(None, "N1~PAYROLL~") is None
    assert parse_cursor("17_N1~PAYROLL~abc") == (17, "N1~PAYROLL~abc")
    for text in ("x", "17", "17_nota-token", "_N1~P~a"):
        with pytest.raises(BadRequest):
            parse_cursor(text)
