from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from app.dead_letters.schemas import BulkIn, BulkOut, BulkRetryIn, DeadLetterList, DeadLetterOut, DeadLetterQuery, RetriedOut, RetryIn
from app.dead_letters.service import DeadLetterService, letter_out, parse_cursor
from app.deps import Operator, SessionDep, StateDep, Viewer
from app.web.custom_methods import custom_method

router = APIRouter(prefix="/v1/dead-letters", tags=["dead-letters"])


def _service(state: StateDep) -> DeadLetterService:
    return DeadLetterService(state.queues, state.policies)


Service = Annotated[DeadLetterService, Depends(_service)]


@router.get("", response_model=DeadLetterList, summary="Dead letters in the order they died, filtered")
async def list_dead_letters(
    service: Service,
    _: Viewer,
    query: Annotated[DeadLetterQuery, Query()],
) -> DeadLetterList:
    found, following = await service.page(query, query.limit, parse_cursor(query.cursor))
    next_cursor = None if following is None else f"{following[0]}_{following[1]}"
    return DeadLetterList(items=[letter_out(f, with_payload=False) for f in found], next_cursor=next_cursor)


@router.get("/{token}", response_model=DeadLetterOut, summary="One dead letter, with its payload")
async def show_dead_letter(token: str, service: Service, _: Viewer) -> DeadLetterOut:
    return await service.show(token)


@custom_method(
    router,
    "POST",
    "/{token}:retry",
    response_model=RetriedOut,
    summary="Queue a dead letter again, under its token",
)
async def retry_dead_letter(token: str, body: RetryIn, service: Service, session: SessionDep, operator: Operator) -> RetriedOut:
    return await service.retry(session, operator.name, token, body.position)


@router.delete("/{token}", status_code=204, summary="Discard a dead letter")
async def discard_dead_letter(token: str, service: Service, session: SessionDep, operator: Operator) -> Response:
    await service.discard(session, operator.name, token)
    return Response(status_code=204)


@custom_method(router, "POST", ":retry", response_model=BulkOut, summary="Queue again every dead letter a filter matches")
async def retry_matching(body: BulkRetryIn, service: Service, session: SessionDep, operator: Operator) -> BulkOut:
    return await service.retry_matching(session, operator.name, body, body.position)


@custom_method(router, "POST", ":discard", response_model=BulkOut, summary="Discard every dead letter a filter matches")
async def discard_matching(body: BulkIn, service: Service, session: SessionDep, operator: Operator) -> BulkOut:
    return await service.discard_matching(session, operator.name, body)
