"""What kind of Redis the service was pointed at.

The service runs on one Redis server (with replicas, if the operator keeps them). A Redis Cluster is refused at
start, loudly, until it is supported (issue 24): a client of one node answered for the keys of that node's slots
only, so the service looked ready while every insert of another node's slots failed with MOVED."""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from app.errors import UNAVAILABLE

log = logging.getLogger(__name__)


class UnsupportedRedis(RuntimeError):
    pass


async def refuse_unsupported(redis: Redis) -> None:
    """Raises UnsupportedRedis when `redis` is a node of a Redis Cluster. A Redis that does not answer yet is let
    through (readiness says it is down, as before): its kind is checked at the next start."""
    try:
        info = await redis.info("cluster")
    except ResponseError:  # INFO renamed or denied (some managed services): nothing to tell by
        return
    except UNAVAILABLE as exc:
        log.warning("Redis does not answer (%s): whether it is a Redis Cluster is not known until the next start", exc)
        return
    if int(info.get("cluster_enabled", 0)):
        raise UnsupportedRedis(
            "WLM_REDIS_URL names a node of a Redis Cluster, which this version does not support yet: point it at a "
            "standalone Redis server (replicas are fine). Every queue's keys share one hash tag already; the client, "
            "the notifications and the durability checks are not cluster-aware."
        )
