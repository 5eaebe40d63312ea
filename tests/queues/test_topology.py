"""Pointed at a Redis Cluster, the service refuses to start and says why, rather than answering ready and then
failing inserts with MOVED (app/queues/topology.py), on a real 3-master cluster the test starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from app.config import Settings
from app.queues.topology import UnsupportedRedis
from tests.conftest import running_app
from tests.redis_cluster import redis_cluster


@pytest.fixture(scope="module")
def cluster_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as urls:
        yield urls


def test_the_cluster_is_real(cluster_urls: list[str]) -> None:
    """Three masters that each hold a third of the slots: a key of another node's slots is redirected."""
    assert len(cluster_urls) == 3
    nodes = [redis.Redis.from_url(url) for url in cluster_urls]
    try:
        moved = 0
        for node in nodes:
            try:
                node.set("{wlm:LOCAL:PAYROLL}:probe", 1)
            except redis.exceptions.MovedError:
                moved += 1
        assert moved == 2
    finally:
        for node in nodes:
            node.close()


async def test_the_service_refuses_a_cluster_and_says_why(cluster_urls: list[str], settings: Settings, tmp_path: Path) -> None:
    for url in cluster_urls:  # whichever node the URL names
        with pytest.raises(UnsupportedRedis, match="Redis Cluster, which this version does not support yet"):
            async with running_app(settings.model_copy(update={"redis_url": url})):
                pass


async def test_a_standalone_redis_is_served(settings: Settings) -> None:
    async with running_app(settings) as app:
        assert app.state.wlm.queues is not None
