"""`wlm serve`: migrate the database and serve the API (with an embedded Redis unless WLM_REDIS_URL names one)."""

from __future__ import annotations

import argparse
import copy
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from app.cli.listeners import ReusePortListener, balances_tcp_connections
from app.config import get_settings

if TYPE_CHECKING:
    from uvicorn import Config

APP = "app.main:create_app"
# uvicorn's own logger, so the supervisor's lines read as uvicorn's do.
logger = logging.getLogger("uvicorn.error")


def _log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging, plus the service's own loggers (`app.*`) at the same level and on the same handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["app"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


def _supervise_workers(config: Config) -> None:
    """uvicorn's supervisor (it restarts a worker that dies), each worker on a listener of its own."""
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    try:
        listener = ReusePortListener(config.host, config.port)
    except OSError as exc:
        logger.error("cannot listen on %s:%s: %s", config.host, config.port, exc)
        sys.exit(STARTUP_FAILURE)
    host, port = listener.getsockname()[:2]
    logger.info(
        "Uvicorn running on http://%s:%d with %d workers, each on its own listener (Press CTRL+C to quit)", host, port, config.workers
    )
    with listener:
        Multiprocess(config, sockets=[listener]).run()


def cmd_serve(args: argparse.Namespace) -> None:
    import uvicorn
    from uvicorn.config import LOG_LEVELS

    from app.migrate import upgrade
    from app.redis.embedded import EmbeddedRedis

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(settings.resolved_database_url)
    embedded = None
    if settings.redis_url is None:
        # Started here rather than in each worker, so every uvicorn worker shares one Redis.
        embedded = EmbeddedRedis(settings.data_dir, settings.durability)
        os.environ["WLM_REDIS_URL"] = embedded.start()
        get_settings.cache_clear()
    # uvicorn handles SIGTERM and SIGINT while it serves and raises the signal again once it has shut down: as
    # SystemExit(0), not death by SIGTERM or a KeyboardInterrupt, it lets `finally` stop the embedded Redis last.
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda *_: sys.exit(0))
    options: dict[str, Any] = {
        "factory": True,
        "host": args.host or settings.host,
        "port": args.port or settings.port,
        "workers": settings.workers,
        "timeout_graceful_shutdown": settings.shutdown_grace_seconds,
        "log_level": settings.log_level,
        "log_config": _log_config(settings.log_level),
        # Off where its lines would be dropped: uvicorn builds each request's line before the level is looked at.
        "access_log": LOG_LEVELS.get(settings.log_level.lower(), logging.INFO) <= logging.INFO,
    }
    try:
        if settings.workers > 1 and balances_tcp_connections():
            _supervise_workers(uvicorn.Config(APP, **options))
        else:
            uvicorn.run(APP, **options)
    finally:
        if embedded is not None:
            embedded.stop()
