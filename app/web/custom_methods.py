"""Custom methods, one path style: a verb after a colon on the collection or resource it acts on
(`POST /v1/dead-letters:retry`, `POST /v1/dead-letters/{token}:retry`), as `POST /v1/work:batch` always was. Each
one's former path, with a slash for the colon, is served one more release: marked `deprecated` in the OpenAPI
document, every answer of it carries a `Deprecation` header (RFC 9745) and a `Link` to the new path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])

# When the former paths were deprecated (2026-11-27), as RFC 9745's date: seconds since the epoch.
DEPRECATED_SINCE = "@1795737600"
# Added to the endpoint's name for its former path: the two operations get ids of their own (app.openapi), and
# DeprecationMiddleware knows the former one by it.
FORMER_PATH_SUFFIX = "_former_path"


def custom_method(router: APIRouter, method: str, path: str, **route: Any) -> Callable[[Endpoint], Endpoint]:
    """Serve the endpoint at `path` (`:verb`, under the router's prefix) and, deprecated, at its former path.
    `route`: the route's other arguments (response_model, summary, ...), the same for both."""
    head, verb = path.rsplit(":", 1)

    def register(endpoint: Endpoint) -> Endpoint:
        router.api_route(path, methods=[method], **route)(endpoint)
        router.api_route(
            f"{head}/{verb}",
            methods=[method],
            name=endpoint.__name__ + FORMER_PATH_SUFFIX,
            deprecated=True,
            description=f"Deprecated: the former path of `{method} {router.prefix}{path}`, served until the next release.",
            **route,
        )(endpoint)
        return endpoint

    return register


class DeprecationMiddleware:
    """Adds the notice to every answer of a former path, errors too: at the start of the response, by when routing has
    put the matched route in the scope (as app.web.http_metrics reads it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def announcing(message: Message) -> None:
            route = scope.get("route")
            if message["type"] == "http.response.start" and isinstance(route, APIRoute) and route.name.endswith(FORMER_PATH_SUFFIX):
                headers = MutableHeaders(scope=message)
                headers["Deprecation"] = DEPRECATED_SINCE
                headers["Link"] = f'<{_successor(route.path, scope.get("path_params", {}))}>; rel="successor-version"'
            await send(message)

        await self.app(scope, receive, announcing)


def _successor(former: str, path_params: dict[str, Any]) -> str:
    """The new path of this request: the former path's last slash a colon, its parameters filled in."""
    head, verb = former.rsplit("/", 1)
    return f"{head}:{verb}".format(**{name: quote(str(value), safe="") for name, value in path_params.items()})
