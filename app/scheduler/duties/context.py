"""What every duty of the elected scheduler acts with: the process state, the epoch it acts under (the fencing
token), the name it holds its leases by; and the environments it acts on."""

from __future__ import annotations

from dataclasses import dataclass

from app.events.service import publish
from app.queues.base import AeConfig
from app.queues.keys import AeKeys
from app.state import AppState


@dataclass(frozen=True, slots=True)
class DutyContext:
    state: AppState
    epoch: int
    # This process in the duties' own leases: the same after a re-election, so it finds them its own.
    owner: str

    async def advise(self, name: str, **data: object) -> None:
        """Publish an advisory stamped with the epoch it was decided under."""
        await publish(self.state.queues.context, name, epoch=self.epoch, **data)

    async def environments(self, *, retired: bool = False) -> list[tuple[AeKeys, AeConfig]]:
        """The environments of the active policy on their nodes, and with `retired` those that left it with
        something still to finish (records to write, exits to call)."""
        state = self.state
        policy = await state.policies.current()
        result = [(r.keys, r.config) for r in await state.queues.environments.retired()] if retired else []
        if policy is None:
            return result
        for ae in policy.application_environments:
            config = policy.queue_config(ae)
            assert config is not None
            result += [(state.queues.keys(node, ae), config) for node in policy.nodes if policy.hosts(ae, node)]
        return result
