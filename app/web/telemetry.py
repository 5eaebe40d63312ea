"""FastAPI's OpenTelemetry instrumentation: on for the signals whose provider is set when the application is made.

FastAPI looks on every request whether a tracer, meter or logger provider has been set since (three lookups and type
checks: 1.1 % of the service's samples on the single-request lifecycle, bench/profile_lifecycle.py). The service
decides as it makes its application: a provider an OpenTelemetry SDK set by then (`opentelemetry-instrument wlm
serve`, or code that runs before) turns that signal on, as FastAPI would have; a signal off then stays off, and costs
no look per request.
"""

from __future__ import annotations

import os

from fastapi.telemetry import TelemetryConfig
from opentelemetry import _logs, metrics, trace

# OpenTelemetry's stand-ins until an SDK sets a provider, by module and class (FastAPI tells them apart the same way:
# the API has no public "is configured").
_STAND_INS = frozenset(
    {
        ("opentelemetry.trace", "ProxyTracerProvider"),
        ("opentelemetry.metrics._internal", "_ProxyMeterProvider"),
        ("opentelemetry._logs._internal", "ProxyLoggerProvider"),
    }
)


def is_set(provider: object) -> bool:
    cls = type(provider)
    return (cls.__module__, cls.__name__) not in _STAND_INS


def telemetry_config() -> TelemetryConfig | None:
    """FastAPI's `telemetry` argument: each signal on whose provider is set now; None (FastAPI's defaults, each looked
    at per request) where FastAPI is to configure the SDK itself as the application starts."""
    if os.getenv("FASTAPI_OTEL_AUTO_CONFIGURE", "").lower() == "true":
        return None
    return {
        "tracing": is_set(trace.get_tracer_provider()),
        "metrics": is_set(metrics.get_meter_provider()),
        "logs": is_set(_logs.get_logger_provider()),
    }
