"""IWM4SLI's limits in force (app/servers/limits.py): those set over the policy's hold until the policy changes the
environment's own; the newest servers beyond a new maximum are the ones retired."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.policy.schemas import ServerLimits
from app.servers.limits import beyond_max, effective_limits
from app.servers.schemas import ServerLimitsOverride

POLICY_LIMITS = ServerLimits(min=1, max=8, spread_min=True)


def _override(limits: ServerLimits, over: ServerLimits = POLICY_LIMITS) -> ServerLimitsOverride:
    return ServerLimitsOverride(limits=limits, policy_limits=over, source="server", set_by="srv", set_at=datetime(2026, 11, 25, tzinfo=UTC))


def test_without_an_override_the_policy_s_limits_are_in_force() -> None:
    assert effective_limits(POLICY_LIMITS, None) == (POLICY_LIMITS, None)


def test_an_override_set_over_the_policy_s_limits_is_in_force() -> None:
    override = _override(ServerLimits(min=0, max=2))
    assert effective_limits(POLICY_LIMITS, override) == (ServerLimits(min=0, max=2), override)


def test_a_policy_that_changes_the_limits_ends_the_override() -> None:
    override = _override(ServerLimits(min=0, max=2))
    changed = ServerLimits(min=1, max=9, spread_min=True)
    assert effective_limits(changed, override) == (changed, None)


@pytest.mark.parametrize(
    ("servers", "maximum", "retired"),
    [([3, 1, 2], None, []), ([3, 1, 2], 3, []), ([3, 1, 2], 5, []), ([3, 1, 2], 1, [2, 3]), ([7], 1, []), ([], 1, [])],
)
def test_the_newest_servers_beyond_a_maximum_are_retired(servers: list[int], maximum: int | None, retired: list[int]) -> None:
    assert beyond_max(servers, maximum) == retired
