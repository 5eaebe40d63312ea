from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.deps import StateDep
from app.health.metrics import queue_metrics
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
async def metrics(state: StateDep) -> Response:
    """This process's counters, and the queues' state read from Redis now (app/health/metrics.py)."""
    return Response(generate_latest() + await queue_metrics(state.queues, await state.policies.current()), media_type=CONTENT_TYPE_LATEST)
