"""The sweeper's pass, every WLM_SWEEPER_INTERVAL_SECONDS when WLM_SWEEPER_ENABLED: each queue's backlog beyond
what its servers take soon moved to the database and back (app/sweeper). Under the scheduler's epoch: a deposed
scheduler's sweep is refused by the scripts."""

from __future__ import annotations

from app.scheduler.duties.context import DutyContext
from app.sweeper.blobs import SweptBlobs
from app.sweeper.service import Sweeper


class QueueSweeping:
    def __init__(self, context: DutyContext) -> None:
        self.context = context

    async def sweep_queues(self) -> None:
        state = self.context.state
        queues = state.queues
        assert isinstance(queues.blobs, SweptBlobs)  # the service's store always has the database's (app/main.py)
        sweeper = Sweeper(queues, queues.blobs, state.settings, self.context.epoch)
        for keys, config in await self.context.environments():
            await sweeper.sweep_environment(keys, await queues.known_classes(keys, config))
