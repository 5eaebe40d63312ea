"""The resource groups of the active policy with their counts, read from Redis (so every replica answers alike)."""

from __future__ import annotations

from app.policy.service import PolicyStore
from app.queues.store import QueueStore
from app.resource_groups.schemas import ResourceGroupOut


async def resource_groups(queues: QueueStore, policies: PolicyStore) -> list[ResourceGroupOut]:
    policy = await policies.current()
    if policy is None or not policy.resource_groups:
        return []
    described = {group.name: group.description for group in policy.definition.resource_groups}
    members: dict[str, list[str]] = {name: [] for name in policy.resource_groups}
    for service_class in policy.definition.service_classes:
        if service_class.resource_group is not None:
            members[service_class.resource_group].append(service_class.name)
    groups = list(policy.resource_groups.values())
    figures = await queues.groups.figures(groups)
    return [
        ResourceGroupOut(
            name=group.name,
            description=described[group.name],
            service_classes=members[group.name],
            max_in_flight=group.max_in_flight,
            min_in_flight=group.min_in_flight,
            in_flight=figure.in_flight,
            capped_seconds=figure.capped_ms / 1000,
        )
        for group, figure in zip(groups, figures, strict=True)
    ]
