"""Roles and what they imply (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"  # service definition, keys, everything an operator may do
    OPERATOR = "operator"  # VARY commands, and what a viewer may see
    VIEWER = "viewer"  # reports and displays
    QUEUE_MANAGER = "queue_manager"  # connects as a queue manager, classifies and queues work
    SERVER = "server"  # connects as a server (with a permit for the resource), selects and ends work


# Roles that carry others with them. Queue manager and server are deliberately not implied by admin:
# a key that runs workloads should not also be able to change the policy, and the reverse.
IMPLIES: dict[Role, frozenset[Role]] = {
    Role.ADMIN: frozenset({Role.ADMIN, Role.OPERATOR, Role.VIEWER}),
    Role.OPERATOR: frozenset({Role.OPERATOR, Role.VIEWER}),
}


def effective_roles(roles: Iterable[str]) -> frozenset[Role]:
    result: set[Role] = set()
    for name in roles:
        role = Role(name)
        result |= IMPLIES.get(role, {role})
    return frozenset(result)


@dataclass(frozen=True, slots=True)
class PrincipalInfo:
    """What a request knows about its caller once the API key is verified."""

    id: int
    name: str
    roles: frozenset[Role]
    permits: tuple[str, ...]
    key_id: str
    # Checked on every call, the cached ones too (app.auth.service.authenticate).
    key_expires_at: datetime | None

    def has_any(self, roles: Iterable[Role]) -> bool:
        return not self.roles.isdisjoint(roles)
