"""Prometheus metrics of the HTTP layer, and the ASGI middleware that records them."""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HTTP_REQUESTS = Counter("wlm_http_requests_total", "HTTP requests served", ["method", "route", "status"])
HTTP_SECONDS = Histogram(
    "wlm_http_request_duration_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


class MetricsMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware) so it costs microseconds; labels by route template, not raw path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # Each label set's counter and histogram, as `labels()` gives them: looked up by labels anew, they cost a
        # request three times what counting it does (docs/benchmarks.md, session 36). As many as prometheus_client
        # keeps itself: one per method, route template and status seen.
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            labels = (scope["method"], template, status)
            children = self._children.get(labels)
            if children is None:
                children = self._children[labels] = (
                    HTTP_REQUESTS.labels(labels[0], template, str(status)),
                    HTTP_SECONDS.labels(labels[0], template),
                )
            children[0].inc()
            children[1].observe(time.perf_counter() - started)
