"""FastAPI's OpenTelemetry instrumentation follows the providers set when the application is made (app/web/telemetry.py)."""

from __future__ import annotations

import pytest
from opentelemetry import _logs, metrics, trace

from app.web.telemetry import _STAND_INS, is_set, telemetry_config


def test_the_stand_ins_are_fastapi_s() -> None:
    """Copied from FastAPI's private list: were they to drift apart, a signal would count as set and FastAPI's own
    per-request look would come back."""
    from fastapi.telemetry import _api

    assert _STAND_INS == _api._DEFERRED_PROVIDERS


def test_the_stand_ins_are_not_set_and_a_provider_is() -> None:
    assert not is_set(trace.get_tracer_provider())
    assert not is_set(metrics.get_meter_provider())
    assert not is_set(_logs.get_logger_provider())
    assert is_set(trace.NoOpTracerProvider()) and is_set(metrics.NoOpMeterProvider())


@pytest.fixture(autouse=True)
def _fastapi_not_configuring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the caller's environment says."""
    monkeypatch.delenv("FASTAPI_OTEL_AUTO_CONFIGURE", raising=False)


def test_without_an_sdk_every_signal_is_off() -> None:
    assert telemetry_config() == {"tracing": False, "metrics": False, "logs": False}


def test_a_provider_set_before_turns_its_signal_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.NoOpTracerProvider)
    assert telemetry_config() == {"tracing": True, "metrics": False, "logs": False}


def test_fastapi_configuring_the_sdk_itself_keeps_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTAPI_OTEL_AUTO_CONFIGURE", "true")
    assert telemetry_config() is None
