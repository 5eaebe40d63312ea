"""One error hierarchy and the one place that renders it. Every failure a client can cause is an AppError subclass
with a stable machine-readable `code` and an HTTP status; the handler renders all of them, FastAPI's validation errors
and unknown routes as `{"error": {"code": ..., "message": ..., ...}}`."""

from __future__ import annotations

import functools
import logging
import re
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from redis.exceptions import ClusterDownError, ReadOnlyError, ResponseError, SlotNotCoveredError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.queues.codes import ReturnCode
from app.queues.request_meta import STATE_OF

log = logging.getLogger(__name__)


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error response: a stable `code` to branch on, a `message` for people, and details by error."""

    error: ErrorDetail


# What each error status means, for the OpenAPI document (app.openapi declares them per operation).
ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "Malformed request",
    401: "Missing, unknown, revoked or expired API key",
    403: "The key's principal lacks the role or permit",
    404: "Unknown resource",
    409: "Not allowed in the resource's current state",
    413: "The body is larger than the route allows (`limit_bytes`), or a payload or result in it is (`path`)",
    415: "The body's content type is not one the route reads",
    422: "Invalid field; `errors` lists each path",
    429: "Too many: the queue is at its backlog limit, or the replica serves all the event streams it may",
    503: "Redis or the database is unavailable, or did not confirm a write in time; retry",
}


class AppError(Exception):
    status: int = 400
    code: str = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.details = details

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.details}}


class BadRequest(AppError):
    status, code = 400, "bad_request"


class Unauthenticated(AppError):
    status, code = 401, "unauthenticated"


class Forbidden(AppError):
    status, code = 403, "forbidden"


class NotFound(AppError):
    status, code = 404, "not_found"


class Conflict(AppError):
    status, code = 409, "conflict"


class Fenced(Conflict):
    """A scheduler's duty refused: a newer scheduler (higher epoch) already acted on the queue."""

    code = "fenced"


class PayloadTooLarge(AppError):
    status, code = 413, "payload_too_large"


class UnsupportedMediaType(AppError):
    status, code = 415, "unsupported_media_type"


class ValidationFailed(AppError):
    """422 with `errors: [{path, message}]`, one entry per offending field."""

    status, code = 422, "validation_failed"

    def __init__(self, errors: Sequence[Mapping[str, str | int]], message: str | None = None) -> None:
        if message is None:
            message = f"{errors[0]['path']}: {errors[0]['message']}"
            if len(errors) > 1:
                message += f" (and {len(errors) - 1} more)"
        summary = message
        super().__init__(summary, errors=errors)


class TooManyRequests(AppError):
    status, code = 429, "too_many_requests"


class ServiceUnavailable(AppError):
    status, code = 503, "service_unavailable"


# What a client is answered for each return code of the Lua scripts (app/queues/codes.py), in this one place.
# Each entry: (error class, code, message, names of the script's extra return values, given as details).
_LUA_ERRORS: dict[ReturnCode, tuple[type[AppError], str, str, tuple[str, ...]]] = {
    ReturnCode.UNKNOWN_WORK: (NotFound, "unknown_work", "no such work request", ()),
    ReturnCode.SERVER_NOT_REGISTERED: (
        Conflict, "server_not_registered", "this server is not registered with its application environment; connect again", ()
    ),
    ReturnCode.WORKER_TASKS_EXHAUSTED: (
        Conflict, "worker_tasks_exhausted", "the server already holds as many requests as it has worker tasks",
        ("in_flight", "worker_tasks"),
    ),
    ReturnCode.OVERFLOW_NOT_NEEDED: (
        Conflict, "overflow_not_needed", "an overflow server gets work only when every other server is at capacity", ()
    ),
    ReturnCode.ALREADY_ENDED: (Conflict, "already_ended", "the work request has already ended", ("outcome",)),
    ReturnCode.NOT_HOLDER: (
        Conflict, "not_holder", "the work request is not held by this server (never selected by it, or reassigned)", ()
    ),
    ReturnCode.NOT_QUEUED: (Conflict, "not_queued", "the work request is no longer queued (selected by a server)", ("state",)),
    ReturnCode.BACKLOG_LIMIT: (
        TooManyRequests, "backlog_limit", "the queue is at its backlog limit", ("service_class", "depth", "backlog_limit")
    ),
    ReturnCode.SERVER_SURPLUS: (
        Conflict, "server_surplus", "the server is not needed any more: end what it holds, disconnect and stop (0C14)", ()
    ),
    ReturnCode.UNKNOWN_DEAD_LETTER: (NotFound, "unknown_dead_letter", "no such dead letter (retried, discarded or expired)", ()),
    ReturnCode.FENCED: (
        Fenced, "fenced", "a newer scheduler has acted on this queue: this process is no longer the scheduler", ("epoch",)
    ),
    # The slow queue sweeper's: handled inside the queue store, never answered to a client.
    ReturnCode.FRONT_SWEPT: (
        Conflict, "front_swept", "the queue's next requests are in the database: its next blob must come back first", ("queue",)
    ),
    ReturnCode.BLOB_RESTORED: (Conflict, "blob_restored", "another process brought this blob back first", ()),
    ReturnCode.NOT_SWEPT: (Conflict, "not_swept", "the request is in memory (its blob came back)", ()),
    ReturnCode.SWEEP_ABORTED: (
        Conflict, "sweep_aborted", "the sweep raced with a select, delete or change of a request it was moving", ()
    ),
    ReturnCode.DEAD_LETTER_MOVED: (Conflict, "dead_letter_moved", "the dead letter is in another queue (asked again)", ("queue",)),
}  # fmt: skip


def lua_error(code: int, values: list[Any]) -> AppError:
    """The error a script's return code (other than OK) stands for, with its extra return values as details."""
    try:
        error_class, error_code, message, names = _LUA_ERRORS[ReturnCode(code)]
    except (ValueError, KeyError):  # no code of app/queues/codes.py, or OK
        error_class, error_code, message, names = AppError, "internal", f"queue script code {code}", ()
    details = {name: _plain(value) for name, value in zip(names, values, strict=False)}
    if "state" in details and details["state"] in STATE_OF:
        details["state"] = STATE_OF[details["state"]].word
    if error_code == "backlog_limit":
        details["reason_code"] = "BACKLOG_LIMIT"
    return error_class(message, code=error_code, **details)


def _plain(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def format_loc(loc: tuple[Any, ...] | list[Any]) -> str:
    """('body', 'service_classes', 0, 'importance') -> 'service_classes[0].importance'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path or "(root)"


# The fields that select the variant of a discriminated union in this API's bodies.
UNION_DISCRIMINATORS = ("type", "role")


def pydantic_errors(errors: Sequence[Mapping[str, Any]], data: Any, *, drop_prefix: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """Pydantic errors as [{path, message}] with paths into the document the user sent (`data`)."""
    result = []
    for err in errors:
        loc = list(err.get("loc", ()))
        while loc and loc[0] in drop_prefix:
            loc.pop(0)
        message = err.get("msg", "invalid")
        ctx = err.get("ctx") or {}
        if err.get("type") in ("union_tag_invalid", "union_tag_not_found"):
            # Pydantic reports a bad or missing discriminator at the union; users look for the field.
            loc.append(str(ctx.get("discriminator", "type")).strip("'"))
            message = f"must be one of {ctx['expected_tags']}" if "expected_tags" in ctx else "is required"
        result.append({"path": format_loc(_user_loc(loc, data)), "message": message})
    return result


def _user_loc(loc: list[Any], data: Any) -> list[Any]:
    """Pydantic puts the tag of a discriminated union (the `type: percentile` of a goal) and validator names
    into locations; users wrote neither. Walking the document tells them apart: a tag is the value of the
    object's discriminator field, and never the last element, as the error lies inside the tagged model."""
    path: list[Any] = []
    current = data
    for i, part in enumerate(loc):
        is_last = i == len(loc) - 1
        if isinstance(part, str) and part.startswith("function-"):
            continue
        if isinstance(current, dict) and not is_last and any(current.get(key) == part for key in UNION_DISCRIMINATORS):
            continue
        path.append(part)
        if isinstance(current, dict):
            current = current.get(part)
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        else:
            current = None
    return path


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
}


# A dependency down, restarting or saturated: nothing was half-written (every queue change is one script, every
# database change one transaction), and a retry after it is back succeeds.
# On a Redis Cluster, a failed master's slots answer CLUSTERDOWN until its replica takes over; a master demoted to a
# replica by a failover answers writes READONLY.
UNAVAILABLE = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterDownError,
    SlotNotCoveredError,
    ReadOnlyError,
    OperationalError,
    SQLAlchemyTimeoutError,
)


# Beneath redis-py's write: asyncio's stream and transports, or uvloop's.
_TRANSPORT_FILES = ("asyncio/streams.py", "asyncio/selector_events.py", ".pyx")


def closed_while_writing(exc: BaseException) -> bool:
    """A Redis connection lost the way redis-py 8.1 does not say so (redis/redis-py#4287): one closed by another call
    (as a failed node's connections are dropped) while this call wrote on it raises AttributeError, TypeError or
    (uvloop) RuntimeError from the write, which is neither UNAVAILABLE nor retried. Told apart from a mistake by
    where it was raised: in redis-py's write, or beneath it in the transport."""
    if not isinstance(exc, AttributeError | TypeError | RuntimeError):
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    sends = (i for i, f in enumerate(frames) if f.name == "_send_packed_command" and f.filename.endswith("redis/asyncio/connection.py"))
    write = next(sends, None)
    return write is not None and all(f.filename.endswith(_TRANSPORT_FILES) for f in frames[write + 1 :])


def unavailable(exc: BaseException) -> bool:
    """Whether `exc` is a dependency down, restarting or saturated (see UNAVAILABLE)."""
    return isinstance(exc, UNAVAILABLE) or closed_while_writing(exc) or too_few_replicas(exc)


def too_few_replicas(exc: BaseException) -> bool:
    """A Redis master refusing writes while it has fewer replicas than its `min-replicas-to-write` (NOREPLICAS,
    which redis-py has no class for): an outage until its replicas are back."""
    return type(exc) is ResponseError and str(exc).startswith("NOREPLICAS")


def unavailable_dependency(exc: BaseException) -> str:
    """'redis' or 'database': which one an unavailable error (`unavailable`) is of."""
    return "database" if isinstance(exc, OperationalError | SQLAlchemyTimeoutError) else "redis"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(AppError)
    async def _app_error(_: Request, exc: AppError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(ValidationFailed(pydantic_errors(exc.errors(), exc.body, drop_prefix=("body",))))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = AppError(str(exc.detail), code=_HTTP_CODES.get(exc.status_code, "http_error"))
        error.status = exc.status_code
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(app, request))
        return error_response(error, headers)

    async def _unavailable(_: Request, exc: Exception) -> JSONResponse:
        # The client may retry (see UNAVAILABLE).
        log.warning("dependency unavailable: %s", exc)
        which = unavailable_dependency(exc)
        error = ServiceUnavailable(f"the {which} is unavailable; retry shortly", code=f"{which}_unavailable")
        return error_response(error, {"Retry-After": "1"})

    for error_class in UNAVAILABLE:
        app.add_exception_handler(error_class, _unavailable)

    @app.exception_handler(ResponseError)
    async def _redis_refused(request: Request, exc: ResponseError) -> JSONResponse:
        if too_few_replicas(exc):
            return await _unavailable(request, exc)
        return await _unexpected(request, exc)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if closed_while_writing(exc):
            return await _unavailable(request, exc)
        log.exception("unhandled error")
        error = AppError("internal error; see the service log", code="internal")
        error.status = 500
        return error_response(error)


# The methods an Allow header may name.
HTTP_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


@functools.lru_cache(maxsize=256)
def _template(path: str) -> tuple[re.Pattern[str], int]:
    """An OpenAPI path's pattern, and its literal characters: the more of them, the more specific the path."""
    literal = re.split(r"\{[^}]+\}", path)
    return re.compile("[^/]+".join(map(re.escape, literal))), sum(map(len, literal))


def allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """The methods the OpenAPI document gives the request's path, of its most specific path that matches, as OpenAPI
    matches a literal segment before a parameter: POST for /v1/work/select, not also /v1/work/{token}'s GET and
    DELETE. Starlette's 405 names those of the first route that matched only, where a path's operations are routes
    of their own. A path the document does not have: the methods its routes serve."""
    path = request.scope["path"]
    documented = [(_template(t)[1], item) for t, item in app.openapi()["paths"].items() if _template(t)[0].fullmatch(path)]
    if documented:
        item = max(documented, key=lambda found: found[0])[1]
        return [m for m in HTTP_METHODS if m.lower() in item]
    routes = app.router.routes
    return [m for m in HTTP_METHODS if any(r.matches({**request.scope, "method": m})[0] is Match.FULL for r in routes)]


def error_response(error: AppError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The one response every error body is sent in: the handlers' and the middlewares' that answer before routing."""
    merged = {"WWW-Authenticate": "Bearer"} if error.status == 401 else {}
    merged.update(headers or {})
    return JSONResponse(error.body(), status_code=error.status, headers=merged or None)
