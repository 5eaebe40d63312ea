"""The `wlm` commands that talk to a running service as an admin, over its HTTP API: policy, keys, vary, display,
route, events, demo (and dead, in dead.py, over the client and calls made here)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from app.cli.errors import CliError
from app.config import get_settings


def _service_url(args: argparse.Namespace) -> str:
    settings = get_settings()
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    return str(args.url or os.environ.get("WLM_URL") or f"http://{host}:{settings.port}")


def _api_key(args: argparse.Namespace) -> str:
    key = args.key or os.environ.get("WLM_API_KEY")
    key_file = Path(args.key_file) if args.key_file else get_settings().data_dir / "admin.key"
    if not key and key_file.exists():
        key = key_file.read_text().strip()
    if not key:
        raise CliError(f"no API key: pass --key or --key-file, set WLM_API_KEY, or run where the service saved {key_file}")
    return str(key)


def client_of(args: argparse.Namespace) -> httpx.Client:
    return httpx.Client(base_url=_service_url(args), headers={"Authorization": f"Bearer {_api_key(args)}"}, timeout=30)


def call(client: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    try:
        response = client.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the service at {client.base_url}: {exc}") from exc
    return _call_result(response)


def _call_result(response: httpx.Response) -> Any:
    """The response's JSON, or its error body as a CliError."""
    if response.status_code >= 400:
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            raise CliError(f"HTTP {response.status_code}: {response.text[:500]}") from None
        lines = [f"error {response.status_code} {error.get('code')}: {error.get('message')}"]
        lines += [f"  {item['path']}: {item['message']}" for item in error.get("errors", [])]
        raise CliError("\n".join(lines))
    return response.json() if response.content else None


def cmd_policy(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        if args.action == "install":
            path = Path(args.file)
            if not path.exists():
                raise CliError(f"no such file: {path}")
            media = "application/json" if path.suffix.lower() == ".json" else "application/yaml"
            result = call(
                client, "PUT", "/v1/policy", content=path.read_bytes(), headers={"Content-Type": media}, params={"dry_run": args.dry_run}
            )
            verb = "valid (dry run)" if args.dry_run else "installed and active" if result["changed"] else "unchanged: already active"
            print(f"policy {result['name']} version {result['version']}: {verb}")
        elif args.action == "show":
            response = client.get("/v1/policy", headers={"Accept": "application/yaml"})
            if response.status_code >= 400:
                call(client, "GET", "/v1/policy")
            print(response.text, end="")
        elif args.action == "versions":
            for item in call(client, "GET", "/v1/policy/versions")["items"]:
                print(f"{item['version']:>5}  {item['name']:<12} {item['installed_at']}  by {item['installed_by']}")


def cmd_keys(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        if args.action == "create":
            existing = client.get(f"/v1/principals/{args.principal}")
            if existing.status_code == 404:
                if not args.role:
                    raise CliError(f"principal {args.principal} does not exist yet: give its --role")
                call(client, "POST", "/v1/principals", json={"name": args.principal, "roles": args.role, "permits": args.permit or []})
            elif args.role or args.permit:
                patch = {k: v for k, v in (("roles", args.role), ("permits", args.permit)) if v}
                call(client, "PATCH", f"/v1/principals/{args.principal}", json=patch)
            created = call(client, "POST", "/v1/api-keys", json={"principal": args.principal, "description": args.description})
            print(f"key {created['id']} for {created['principal']} (shown once):", file=sys.stderr)
            print(created["key"])
        elif args.action == "list":
            for item in call(client, "GET", "/v1/api-keys")["items"]:
                state = "revoked" if item["revoked_at"] else "active"
                print(f"{item['id']}  {item['principal']:<20} {state:<8} {item['description']}")
        elif args.action == "revoke":
            call(client, "DELETE", f"/v1/api-keys/{args.key_id}")
            print(f"revoked {args.key_id}")


# A first word that is a VARY verb means the whole command was typed, perhaps unquoted: `wlm vary V WLM,APPLENV=X,Q`.
_VARY_VERBS = ("V", "VARY")


def cmd_vary(args: argparse.Namespace) -> None:
    words = args.words
    if len(words) == 2 and words[0].upper() not in _VARY_VERBS:
        body: dict[str, Any] = {"application_environment": words[0], "action": words[1], "dynamic": args.dynamic}
    elif len(words) == 1 or words[0].upper() in _VARY_VERBS:
        if args.dynamic:
            raise CliError("--dynamic goes with the short form (wlm vary NAME ACTION); in a command, write DYNAPPL=")
        body = {"command": " ".join(words)}
    else:
        raise CliError('give a command ("VARY WLM,APPLENV=PAYROLL,QUIESCE") or an environment and an action (PAYROLL quiesce)')
    with client_of(args) as client:
        result = call(client, "POST", "/v1/operator/commands", json=body)
    print(f"{result['command']}: {result['application_environment']} {result['previous_state']} -> {result['state']}")


def _display_table(items: list[dict[str, Any]]) -> list[str]:
    """The environments, the queued requests by class last, most important first."""
    rows = [
        (
            item["name"],
            item["state"],
            str(item["servers"]),
            str(item["in_flight"]),
            str(item["queued_total"]),
            " ".join(f"{service_class}={count}" for service_class, count in item["queued"].items()) or "-",
        )
        for item in items
    ]
    return _columns(("NAME", "STATE", "SERVERS", "IN-FLIGHT", "QUEUED", "QUEUED BY CLASS"), rows, (False, False, True, True, True))


def _columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], numeric: tuple[bool, ...]) -> list[str]:
    """Fixed-width columns, as wide as their longest value, the last one as it is."""
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(len(header) - 1)]
    lines = []
    for row in (header, *rows):
        cells = [cell.rjust(width) if right else cell.ljust(width) for cell, width, right in zip(row[:-1], widths, numeric, strict=True)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def _groups_table(groups: list[dict[str, Any]]) -> list[str]:
    """The resource groups: their requests in flight against their caps, and how long their work waited on them."""
    rows = [
        (
            group["name"],
            str(group["in_flight"]),
            "-" if group["max_in_flight"] is None else str(group["max_in_flight"]),
            "-" if group["min_in_flight"] is None else str(group["min_in_flight"]),
            f"{group['capped_seconds']:.1f}s",
            " ".join(group["service_classes"]) or "-",
        )
        for group in groups
    ]
    return _columns(("RESOURCE GROUP", "IN-FLIGHT", "MAX", "MIN", "CAPPED", "CLASSES"), rows, (False, True, True, True, True))


def cmd_display(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        result = call(client, "GET", "/v1/application-environments", params={"name": args.pattern})
        groups = call(client, "GET", "/v1/resource-groups")["items"]
    if not result["items"]:
        print(f"{result['command']}: no application environment matches")
        return
    print(result["command"])
    for line in _display_table(result["items"]):
        print(line)
    if groups:
        print()
        for line in _groups_table(groups):
            print(line)


# `wlm route ACTION NODE`: the change each one-word action makes to the node's routing attributes.
_NODE_ACTIONS = {
    "suspend": {"suspended": True},
    "resume": {"suspended": False},
    "stop": {"link_stopped": True},
    "start": {"link_stopped": None},
}
_ALTERABLE = ("weight", "network_priority", "rank", "most_recently_used", "use_queue")
# `wlm route stop|start NODE --link LINK`: the change to that one link.
_LINK_ACTIONS: dict[str, dict[str, Any]] = {"stop": {"stopped": True}, "start": {"stopped": None}}


def _explain_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"{result['application_environment']} from {result['queue_manager_node'] or 'no node'}: {result['reason']}"]
    for step in result["steps"]:
        gone = "; ".join(f"{e['node']}{' link ' + e['link'] if e['link'] else ''} ({e['reason']})" for e in step["eliminated"])
        lines.append(f"  step {step['step']:<5} {gone or '-'}")
    return lines


def cmd_route(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        if args.action == "explain":
            params = {
                "application_environment": args.application_environment,
                **({"queue_manager_node": args.origin} if args.origin else {}),
            }
            print("\n".join(_explain_lines(call(client, "GET", "/v1/routing:explain", params=params))))
            return
        if args.action == "nodes":
            nodes = call(client, "GET", "/v1/routing/nodes")["items"]
        elif getattr(args, "link", None):
            nodes = [call(client, "PATCH", f"/v1/routing/nodes/{args.node}/links/{args.link}", json=_link_changes(args))]
        else:
            changes = _NODE_ACTIONS.get(args.action) or {
                name: getattr(args, name) for name in _ALTERABLE if getattr(args, name) is not None
            }
            if not changes:
                raise CliError("name what to alter: " + ", ".join(f"--{name.replace('_', '-')}" for name in _ALTERABLE))
            nodes = [call(client, "PATCH", f"/v1/routing/nodes/{args.node}", json=changes)]
    for node in nodes:
        links = node["links"]
        if len(links) == 1:
            how = f"link {links[0]['state']}, weight {node['weight']}, NETPRTY {links[0]['network_priority']}"
        else:
            listed = ", ".join(f"{link['name']} {link['state']} NETPRTY {link['network_priority']}" for link in links)
            how = f"links {listed}; weight {node['weight']}"
        print(f"{node['node']}: {how}, rank {node['rank']}, use-queue {node['use_queue']}{', suspended' if node['suspended'] else ''}")


def _link_changes(args: argparse.Namespace) -> dict[str, Any]:
    """What `wlm route alter|stop|start NODE --link LINK` changes of the link: only NETPRTY is a link's own."""
    if args.action in _LINK_ACTIONS:
        return _LINK_ACTIONS[args.action]
    others = [f"--{name.replace('_', '-')}" for name in _ALTERABLE if name != "network_priority" and getattr(args, name) is not None]
    if others or args.network_priority is None:
        raise CliError("a link's one attribute to alter is --network-priority" + (f" (not {', '.join(others)})" if others else ""))
    return {"network_priority": args.network_priority}


def cmd_events(args: argparse.Namespace) -> None:
    """Follow the advisories (GET /v1/events) and print one line each: time, subject, data."""
    params = {"subject": args.subject, **({"since": args.since} if args.since else {})}
    with client_of(args) as client:
        try:
            with client.stream("GET", "/v1/events", params=params, timeout=httpx.Timeout(30, read=None)) as response:
                if response.status_code >= 400:
                    response.read()
                    _call_result(response)
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        event = json.loads(line[len("data: ") :])
                        moment = datetime.fromtimestamp(event["at"], UTC).strftime("%Y-%m-%d %H:%M:%S")
                        print(f"{moment} {event['subject']} {json.dumps(event['data'], sort_keys=True)}", flush=True)
        except httpx.HTTPError as exc:
            raise CliError(f"the event stream from {client.base_url} ended: {exc}") from exc


def cmd_demo(args: argparse.Namespace) -> None:
    """Minutes of goal-managed work against the running service, with progress and a summary (app/examples/demo.py)."""
    import asyncio

    from app.examples import demo

    try:
        records_dir = get_settings().data_dir / "records"  # where the service on this host writes them, as data/admin.key
        summary = asyncio.run(
            demo.run(_service_url(args), _api_key(args), minutes=args.minutes, phase_seconds=args.phase_seconds, records_dir=records_dir)
        )
    except demo.DemoError as exc:
        raise CliError(f"demo: {exc}") from None
    except KeyboardInterrupt:
        raise CliError("demo interrupted (its queue manager disconnected, its key revoked, PAYROLL not left quiesced)") from None
    print("\n".join(summary.lines()))
