"""`wlm whatif`: a recorded day replayed under a candidate policy (spark_jobs/what_if), with the service's settings;
the candidate checked as an install checks it first, and a table of predicted against recorded per class period."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.cli.errors import INPUT_ERROR, CliError
from app.cli.report import job_settings
from app.config import Settings, get_settings
from spark_jobs.common.job_log import JobFailed
from spark_jobs.what_if.arguments import NO_RECORDS_EXIT, NoRecords, add_arguments, run_from_arguments
from spark_jobs.what_if.model import ManagerSettings


def add_parser(sub: Any) -> None:
    whatif = sub.add_parser(
        "whatif",
        help="replay a recorded day under a candidate policy and predict each goal (PySpark)",
        description=f"Exit status: 0 done, 1 failed, {INPUT_ERROR} a candidate the policy install refuses, "
        f"{NO_RECORDS_EXIT} no records of that day (no_records).",
    )
    whatif.add_argument("--policy", type=Path, required=True, help="the candidate service definition (YAML or JSON)")
    add_arguments(whatif)
    whatif.set_defaults(func=cmd_whatif)


def manager_settings(settings: Settings) -> ManagerSettings:
    """The manager's settings of this service, which the replay runs with (the records hold none)."""
    return ManagerSettings(
        settings.goal_interval_seconds, settings.goal_window_seconds, settings.blocked_promotion_seconds, settings.blocked_promotion_share
    )


def read_candidate(path: Path, settings: Settings) -> dict[str, Any]:
    """The candidate at `path`, checked as `wlm policy install` would have the service check it."""
    # Imported here: the policy's checks import the service's web and database modules, which every other `wlm`
    # command (the nightly report's among them) would import at its start for nothing (0.3 s of CPU time).
    from app.errors import AppError, ValidationFailed
    from app.policy.service import checked_candidate

    try:
        body = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", INPUT_ERROR) from None
    content_type = "application/json" if path.suffix.lower() == ".json" else "application/yaml"
    try:
        return checked_candidate(body, content_type, settings.max_policy_bytes, settings.longest_completion_ms)
    except ValidationFailed as exc:
        problems = "\n".join(f"  {error['path']}: {error['message']}" for error in exc.details["errors"])
        raise CliError(f"{path}: the candidate is not a valid service definition ({exc.code}):\n{problems}", INPUT_ERROR) from None
    except AppError as exc:
        raise CliError(f"{path}: {exc.message} ({exc.code})", INPUT_ERROR) from None


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _pi(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(result: Mapping[str, Any]) -> list[str]:
    """Predicted against recorded per environment and class period: the whole day's PI, the share of intervals that
    met the goal, and FALLS where the candidate's share is below the recorded day's."""
    lines = [f"{'ENVIRONMENT':<12} {'CLASS':<10} {'PER':>3} {'PI PRED':>8} {'PI REC':>8} {'MET PRED':>9} {'MET REC':>8}"]
    for environment in result["environments"]:
        for item in environment["summary"]:
            line = (
                f"{environment['application_environment']:<12} {item['service_class']:<10} {item['period']:>3}"
                f" {_pi(item['predicted_pi']):>8} {_pi(item['actual_pi']):>8}"
                f" {_share(item['predicted_attainment']):>9} {_share(item['actual_attainment']):>8}"
            )
            lines.append(line + ("  FALLS" if item["falls"] else ""))
    return lines


def cmd_whatif(args: argparse.Namespace) -> None:
    settings = get_settings()
    candidate = read_candidate(args.policy, settings)
    if importlib.util.find_spec("pyspark") is None:
        raise CliError("wlm whatif needs PySpark, the service's `report` extra, which is not installed here: `pip install -e '.[report]'`")
    try:
        run = run_from_arguments(args, job_settings(settings), candidate, manager_settings(settings))
    except NoRecords as missing:
        raise CliError(str(missing), NO_RECORDS_EXIT) from None
    except JobFailed as failure:
        raise CliError(str(failure)) from None
    print("\n".join(table(run.result)))
    falling = sum(item["falls"] for environment in run.result["environments"] for item in environment["summary"])
    print(f"what-if {run.result['date']}: {falling} class periods would meet their goal less often; result in {run.path}")
