"""IWM4SLI: the server limits an application environment runs under (pure).

The policy gives each environment its limits. A connected server of the environment, or an operator, may set others
(PUT /v1/application-environments/{name}/server-limits, as a z/OS server does right after IWM4CON). Those hold until
the environment is refreshed, a policy changes the environment's own limits, or an operator resets them: an override
remembers the policy's limits it was set over, and a policy whose limits differ ends it.
"""

from __future__ import annotations

from app.policy.schemas import ServerLimits
from app.servers.schemas import ServerLimitsOverride


def effective_limits(
    policy_limits: ServerLimits, override: ServerLimitsOverride | None
) -> tuple[ServerLimits, ServerLimitsOverride | None]:
    """The limits in force and the override that set them (None: the policy's)."""
    if override is None or override.policy_limits != policy_limits:
        return policy_limits, None
    return override.limits, override


def beyond_max(server_ids: list[int], maximum: int | None) -> list[int]:
    """The servers to retire at once for a new `maximum` (a hard limit): the newest beyond it, so that those holding
    the warmest state stay."""
    if maximum is None or len(server_ids) <= maximum:
        return []
    return sorted(server_ids)[maximum:]
