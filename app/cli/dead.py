"""`wlm dead list|show|retry|discard`: the dead letters of a running service (GET/POST /v1/dead-letters, :retry and :discard)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.cli.client import call, client_of
from app.cli.errors import CliError

# The filter options, by the API field each sets.
FILTERS = {
    "application_environment": "env",
    "node": "node",
    "service_class": "service_class",
    "reason": "reason",
    "since": "since",
    "until": "until",
}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], remote: argparse.ArgumentParser) -> None:
    dead = sub.add_parser("dead", help="dead letters: requests abandoned after their last delivery, or failed for good")
    dead_sub = dead.add_subparsers(dest="action", required=True)
    narrowing = argparse.ArgumentParser(add_help=False)
    narrowing.add_argument("--env", help="application environment")
    narrowing.add_argument("--node")
    narrowing.add_argument("--class", dest="service_class", help="service class")
    narrowing.add_argument("--reason", choices=["max_deliveries", "failed"])
    narrowing.add_argument("--since", help="died at or after (ISO 8601, e.g. 2026-11-25T08:00:00Z)")
    narrowing.add_argument("--until", help="died at or before (ISO 8601)")
    listing = dead_sub.add_parser("list", parents=[remote, narrowing], help="dead letters in the order they died")
    listing.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    dead_sub.add_parser("show", parents=[remote], help="one dead letter, with its payload, as JSON").add_argument("token")
    retry = dead_sub.add_parser("retry", parents=[remote, narrowing], help="queue again one (TOKEN) or all matching a filter")
    retry.add_argument("token", nargs="?")
    retry.add_argument("--front", action="store_true", help="ahead of its class's queued work (default: behind it)")
    retry.add_argument("--all", action="store_true", help="every dead letter (when no filter is given)")
    discard = dead_sub.add_parser("discard", parents=[remote, narrowing], help="discard one (TOKEN) or all matching a filter")
    discard.add_argument("token", nargs="?")
    discard.add_argument("--all", action="store_true", help="every dead letter (when no filter is given)")
    dead.set_defaults(func=cmd_dead)


def _filter(args: argparse.Namespace) -> dict[str, Any]:
    return {field: getattr(args, option) for field, option in FILTERS.items() if getattr(args, option) is not None}


def cmd_dead(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        if args.action == "list":
            _print_list(_listed(client, _filter(args), args.limit))
        elif args.action == "show":
            print(json.dumps(call(client, "GET", f"/v1/dead-letters/{args.token}"), indent=2))
        elif args.token is not None:
            if _filter(args) or args.all:
                raise CliError("give a TOKEN or a filter, not both")
            if args.action == "retry":
                retried = call(client, "POST", f"/v1/dead-letters/{args.token}:retry", json={"position": _position(args)})
                print(f"{args.token}: queued again at the {retried['position']} of {retried['service_class']} (life {retried['life']})")
            else:
                call(client, "DELETE", f"/v1/dead-letters/{args.token}")
                print(f"{args.token}: discarded")
        else:
            body = _filter(args) | ({"all": True} if args.all else {})
            if args.action == "retry":
                body["position"] = _position(args)
            done = call(client, "POST", f"/v1/dead-letters:{args.action}", json=body)
            verb = "queued again" if args.action == "retry" else "discarded"
            print(f"{done['done']} of {done['matched']} matching dead letters {verb}")


def _position(args: argparse.Namespace) -> str:
    return "front" if args.front else "back"


def _listed(client: Any, wanted: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while len(items) < limit:
        params = wanted | {"limit": min(500, limit - len(items))} | ({"cursor": cursor} if cursor else {})
        page = call(client, "GET", "/v1/dead-letters", params=params)
        items += page["items"]
        if (cursor := page["next_cursor"]) is None:
            break
    return items


def _print_list(items: list[dict[str, Any]]) -> None:
    if not items:
        print("no dead letters")
        return
    rows = [("DIED", "TOKEN", "CLASS", "REASON", "DELIVERIES", "ERROR")]
    rows += [(d["died_at"][:19], d["token"], d["service_class"], d["reason"], str(d["deliveries"]), (d["error"] or "")[:60]) for d in items]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=False)) + "  " + row[-1])
