from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.deps import Operator, SessionDep, StateDep
from app.what_if import service
from app.what_if.schemas import WhatIfAccepted, WhatIfDates, WhatIfIn, WhatIfOut

router = APIRouter(prefix="/v1/reports/what-if", tags=["reports"])

RunId = Annotated[int, Path(ge=1, le=2**63 - 1)]
# Digits only in the route itself, so that `/dates` is never a run's id: `DELETE .../dates` is then 405, as a method
# the path does not serve, and not a 422 of the cancel's run_id.
RUN = "/{run_id:int}"


@router.post(
    "",
    status_code=202,
    response_model=WhatIfAccepted,
    summary="Replay a recorded day under a candidate policy: queued, run one at a time (PySpark)",
    description=(
        "`policy` is a service definition, as YAML or JSON text or as an object, read and checked as PUT /v1/policy "
        "reads and checks it: 400 `malformed_document` when the text is not one document, 422 `validation_failed` with "
        "the path of each problem."
    ),
)
async def submit_what_if(body: WhatIfIn, session: SessionDep, state: StateDep, operator: Operator) -> WhatIfAccepted:
    run = await service.submit(session, state.settings, state.what_if, operator.name, body)
    return WhatIfAccepted(id=run.id)


@router.get("/dates", response_model=WhatIfDates, summary="The days that have work records to replay, newest first")
async def what_if_dates(state: StateDep, _: Operator, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> WhatIfDates:
    return WhatIfDates(items=await service.days(state.settings, limit))


@router.get(RUN, response_model=WhatIfOut, summary="A what-if run: its state, progress and, when done, its result")
async def get_what_if(run_id: RunId, session: SessionDep, state: StateDep, _: Operator) -> WhatIfOut:
    return service.run_out(await service.get(session, state.what_if, run_id))


@router.delete(RUN, response_model=WhatIfOut, summary="Cancel a what-if run (a running one's process is ended)")
async def cancel_what_if(run_id: RunId, session: SessionDep, state: StateDep, _: Operator) -> WhatIfOut:
    return service.run_out(await service.cancel(session, state.what_if, run_id))
