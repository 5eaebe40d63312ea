"""Custom methods, one path style: a verb after a colon on the collection or resource it acts on
(`POST /v1/dead-letters:retry`, `POST /v1/dead-letters/{token}:retry`), as `POST /v1/work:batch` always was. The
former `/verb` paths are served one more release: marked `deprecated` in the OpenAPI document, their answers carry a
`Deprecation` header (RFC 9745) and a `Link` to the new path."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request, Response

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])

# When the `/verb` paths were deprecated (2026-11-27), as RFC 9745's date: seconds since the epoch.
DEPRECATED_SINCE = "@1795737600"
# Added to the endpoint's name for its former path, so that the two operations have ids of their own
# (app.openapi.operation_id) and the former one is known as such.
FORMER_PATH_SUFFIX = "_former_path"


def custom_method(router: APIRouter, method: str, path: str, *, former: str, **route: Any) -> Callable[[Endpoint], Endpoint]:
    """Serve the endpoint at `path` (`:verb`) and, deprecated, at its `former` path, both under the router's prefix.
    `route`: the route's other arguments (response_model, summary, ...), the same for both."""

    def register(endpoint: Endpoint) -> Endpoint:
        router.api_route(path, methods=[method], **route)(endpoint)
        successor = router.prefix + path
        router.api_route(
            former,
            methods=[method],
            name=endpoint.__name__ + FORMER_PATH_SUFFIX,
            deprecated=True,
            description=f"Deprecated: the former path of `{method} {successor}`, served until the next release.",
            dependencies=[Depends(_announcing(successor))],
            **route,
        )(endpoint)
        return endpoint

    return register


def _announcing(successor: str) -> Callable[[Request, Response], Awaitable[None]]:
    async def announce(request: Request, response: Response) -> None:
        response.headers["Deprecation"] = DEPRECATED_SINCE
        target = successor.format(**{name: quote(str(value), safe="") for name, value in request.path_params.items()})
        response.headers["Link"] = f'<{target}>; rel="successor-version"'

    return announce
