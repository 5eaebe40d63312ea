"""The demo's plan (pure data): the policy it installs, its three classes of work, and their mix in each phase."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ENVIRONMENT = "PAYROLL"
SUBSYSTEM_TYPE = "CB"
SUBSYSTEM_NAME = "DEMO"

# The example's classes and limits (examples/policy.yaml), with work (WORK_CLASSES) sized to them: ONLINE's 250 ms
# leaves room for its 60 ms of work and a little queueing; a surge of REPORTS (2.8 servers' worth of work) needs
# about half of PAYROLL's eight servers.
DEMO_POLICY: dict[str, Any] = {
    "name": "WLMDEMO",
    "description": "wlm demo: the example's service classes; PAYROLL's echo servers started by the service",
    "service_classes": [
        {
            "name": "ONLINE",
            "description": "interactive requests",
            "importance": 1,
            "goal": {"type": "percentile", "percentile": 90, "response_time_ms": 250},
        },
        {
            "name": "BATCH",
            "description": "long requests, two periods",
            "periods": [
                {"duration_ms": 5000, "importance": 3, "goal": {"type": "average", "response_time_ms": 2000}},
                {"importance": 5, "goal": {"type": "discretionary"}},
            ],
        },
        {"name": "REPORTS", "importance": 4, "goal": {"type": "velocity", "velocity": 40}},
    ],
    "report_classes": ["ATMA", "CASHA", "RPTS"],
    "classification": [
        {
            "subsystem_type": SUBSYSTEM_TYPE,
            "default_service_class": "BATCH",
            "rules": [
                {
                    "qualifier": "UI",
                    "value": "ATM*",
                    "service_class": "ONLINE",
                    "report_class": "ATMA",
                    "rules": [{"qualifier": "TN", "value": "CASH", "report_class": "CASHA"}],
                },
                {"qualifier": "TC", "value": "RPT?", "service_class": "REPORTS", "report_class": "RPTS"},
            ],
        }
    ],
    "application_environments": [
        {
            "name": ENVIRONMENT,
            "subsystem_type": SUBSYSTEM_TYPE,
            "start_command": ["python", "-m", "app.examples.echo_server"],
            "server_limits": {"min": 1, "max": 8, "spread_min": True},
            "completion_time_ms": 30000,
            "backlog_limit": 100000,
        }
    ],
}


@dataclass(frozen=True, slots=True)
class WorkClass:
    service_class: str  # where the demo policy classifies `classification`
    classification: dict[str, str]
    work_ms: float  # the mean time the echo server works on one request (exponentially distributed)


WORK_CLASSES = (
    WorkClass("ONLINE", {"userid": "ATM01", "transaction_name": "CASH"}, 60),
    WorkClass("BATCH", {"userid": "NIGHTLY"}, 400),
    WorkClass("REPORTS", {"transaction_class": "RPT1"}, 700),
)
CLASS_NAMES = tuple(work.service_class for work in WORK_CLASSES)
# A drawn service time is capped, so one unlucky draw does not hold a server for many seconds.
MAX_WORK_FACTOR = 5


@dataclass(frozen=True, slots=True)
class Mix:
    name: str
    label: str  # in the progress lines
    rates: dict[str, float]  # arrivals per second, per service class

    def describe(self) -> str:
        return ", ".join(f"{name} {rate:g}/s" for name, rate in self.rates.items())


REPORTS_SURGE = Mix("a surge of REPORTS, the least important class", "REPORTS surge", {"ONLINE": 4, "BATCH": 0.5, "REPORTS": 4})
ONLINE_SURGE = Mix("a surge of ONLINE, the most important class", "ONLINE surge", {"ONLINE": 16, "BATCH": 0.5, "REPORTS": 0.4})
STEADY = Mix("steady work", "steady", {"ONLINE": 4, "BATCH": 0.5, "REPORTS": 0.4})
MIX_CYCLE = (REPORTS_SURGE, ONLINE_SURGE, STEADY)


@dataclass(frozen=True, slots=True)
class Phase:
    number: int
    start_s: float
    end_s: float
    mix: Mix


def phases(duration_s: float, phase_s: float) -> list[Phase]:
    """The demo's phases: the mixes of MIX_CYCLE in turn, each `phase_s` long (the last cut at `duration_s`)."""
    count = math.ceil(duration_s / phase_s)
    return [Phase(n + 1, n * phase_s, min((n + 1) * phase_s, duration_s), MIX_CYCLE[n % len(MIX_CYCLE)]) for n in range(count)]
