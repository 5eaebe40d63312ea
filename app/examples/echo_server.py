"""A server that answers every request with its payload: `python -m app.examples.echo_server`.

Settings come from the environment: WLM_URL (default http://127.0.0.1:8000), WLM_API_KEY, WLM_SUBSYSTEM_TYPE,
WLM_SUBSYSTEM_NAME, WLM_APPLICATION_ENVIRONMENT, WLM_WORKER_TASKS (1), WLM_WORKER_WEIGHT (1), WLM_SERVER_INSTANCE
(set by the service's launcher) and
WLM_ECHO_DELAY_MS (0, a pause per request; a payload's own `delay_ms` overrides it, so a load generator can give
each request its service time). SIGTERM or SIGINT: finish what is in hand, disconnect, exit.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from wlm_client import Server, install_signal_handlers


def _required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"echo_server: set {name}")
    return value


async def main() -> None:
    delay = int(os.environ.get("WLM_ECHO_DELAY_MS", "0")) / 1000

    async def echo(item: dict[str, Any]) -> dict[str, Any]:
        payload = item["payload"]
        pause = payload["delay_ms"] / 1000 if isinstance(payload, dict) and isinstance(payload.get("delay_ms"), int | float) else delay
        if pause:
            await asyncio.sleep(pause)
        return {"echo": item["payload"]}

    stop = asyncio.Event()
    install_signal_handlers(stop)
    server = await Server.connect(
        os.environ.get("WLM_URL", "http://127.0.0.1:8000"),
        _required("WLM_API_KEY"),
        _required("WLM_SUBSYSTEM_TYPE"),
        _required("WLM_SUBSYSTEM_NAME"),
        _required("WLM_APPLICATION_ENVIRONMENT"),
        worker_tasks=int(os.environ.get("WLM_WORKER_TASKS", "1")),
        worker_weight=int(os.environ.get("WLM_WORKER_WEIGHT", "1")),
        instance=os.environ.get("WLM_SERVER_INSTANCE"),
    )
    logging.info("echo server connected (connection %s); serving", server.info["id"])
    await server.serve(echo, stop_event=stop)
    logging.info("echo server disconnected")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(main())
