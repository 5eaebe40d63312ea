from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from app.deps import StateDep
from app.health.exposition import accepts_gzip, scrape
from app.health.service import readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: Redis answers and the database is reachable and migrated")
async def readyz(state: StateDep) -> JSONResponse:
    checks = await readiness(state.queues, state.engine, state.schema_head)
    if all(result == "ok" for result in checks.values()):
        return JSONResponse({"status": "ready", "checks": checks})
    body = {"error": {"code": "not_ready", "message": "a dependency is not ready", "checks": checks}}
    return JSONResponse(body, status_code=503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(state: StateDep, accept_encoding: Annotated[str, Header()] = "") -> Response:
    """The queues' state as the elected scheduler last rendered it (no older than WLM_METRICS_MAX_AGE_SECONDS) or read
    from Redis now, and this process's counters (app/health/exposition.py); gzipped when the scraper accepts it."""
    policy = await state.policies.current()
    body, headers = await scrape(state.queues, policy, state.settings.metrics_max_age, accepts_gzip(accept_encoding))
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers={**headers, "Vary": "Accept-Encoding"})
