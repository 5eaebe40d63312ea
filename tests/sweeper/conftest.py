"""The sweeper's tests drive its passes themselves (the scheduler's duty is off) on small blobs, with no floor."""

from __future__ import annotations

import pytest

from app.config import Settings


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"sweeper_enabled": False, "sweeper_blob_requests": 10, "sweeper_min_in_memory": 0})
