"""Which copy of a message a listener on every primary keeps (app/redis/broadcast.py, keeper)."""

from __future__ import annotations

import itertools

import pytest

from app.redis.broadcast import keeper

PRIMARIES = ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]


@pytest.mark.parametrize("owner", [*PRIMARIES, "127.0.0.1:7009", None])
@pytest.mark.parametrize("confirmed", [list(c) for n in range(len(PRIMARIES) + 1) for c in itertools.combinations(PRIMARIES, n)])
def test_one_copy_is_kept_the_owner_s_where_it_listens(owner: str | None, confirmed: list[str]) -> None:
    """The owner's copy where its subscription is confirmed; else one and the same other confirmed one, whichever order
    they are given in; none without any."""
    chosen = keeper(owner, confirmed)
    assert chosen == keeper(owner, list(reversed(confirmed)))
    if owner in confirmed:
        assert chosen == owner
    elif confirmed:
        assert chosen in confirmed
    else:
        assert chosen is None


def test_a_standalone_server_s_copy_is_kept() -> None:
    assert keeper("", [""]) == ""
    assert keeper("", []) is None
