"""`wlm work show TOKEN`: a request's own status from a running service (GET /v1/work/{token}), as an operator."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.cli.client import call, client_of


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], remote: argparse.ArgumentParser) -> None:
    work = sub.add_parser("work", help="work requests: how one is doing")
    work_sub = work.add_subparsers(dest="action", required=True)
    show = work_sub.add_parser(
        "show", parents=[remote], help="a request's state, class, position in its queue, expected start and why it waits"
    )
    show.add_argument("token")
    show.add_argument("--json", action="store_true", help="the service's answer as it is")
    work.set_defaults(func=cmd_work)


def cmd_work(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        status = call(client, "GET", f"/v1/work/{args.token}")
    print(json.dumps(status, indent=2) if args.json else "\n".join(f"{name:<15} {value}" for name, value in lines(status)))


def lines(status: dict[str, Any]) -> list[tuple[str, str]]:
    """The answer as an operator reads it: what is known of the request, nothing that is null."""
    outcome = status["outcome"]
    rows = [("token", status["token"]), ("state", status["state"] + (f" ({outcome})" if outcome and outcome != status["state"] else ""))]
    rows.append(("environment", f"{status['application_environment']} on {status['node']}"))
    if status["service_class"]:
        rows.append(("service class", status["service_class"] + (f", period {status['period']}" if status["period"] else "")))
    if status["deliveries"] is not None:
        rows.append(("deliveries", str(status["deliveries"])))
    if status["inserted_at"]:
        rows.append(("queued at", status["inserted_at"]))
    if status["state"] == "queued":
        ahead = status["position"]
        rows.append(("position", "not known" if ahead is None else f"{ahead} ahead of it in its class queue"))
        start = status["expected_start_at"]
        rows.append(("expected start", "no basis" if start is None else f"{start} (in {_seconds(status['expected_wait_ms'])})"))
        rows.append(("waiting for", status["delay_cause"] or "nothing: a worker task is free"))
    return rows


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f} s"
