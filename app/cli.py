"""The `wlm` command: serve the API, migrate the database, and talk to a running service as an admin."""

from __future__ import annotations

import argparse
import copy
import json
import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from app.config import get_settings
from spark_jobs.common.job_log import JobFailed
from spark_jobs.workload_activity.arguments import add_arguments as add_report_arguments
from spark_jobs.workload_activity.arguments import run_from_arguments


class CliError(Exception):
    pass


# ---- serving and the database ---------------------------------------------------------------------------


def _log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging, plus the service's own loggers (`app.*`) at the same level and on the same handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["app"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


def cmd_serve(args: argparse.Namespace) -> None:
    import uvicorn

    from app.embedded_redis import EmbeddedRedis
    from app.migrate import upgrade

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(settings.resolved_database_url)
    embedded = None
    if settings.redis_url is None:
        # Started here rather than in each worker, so every uvicorn worker shares one Redis.
        embedded = EmbeddedRedis(settings.data_dir, settings.durability)
        os.environ["WLM_REDIS_URL"] = embedded.start()
        get_settings.cache_clear()
    # uvicorn handles SIGTERM and SIGINT while it serves and raises the signal again once it has shut down: as
    # SystemExit(0), not death by SIGTERM or a KeyboardInterrupt, it lets `finally` stop the embedded Redis last.
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda *_: sys.exit(0))
    try:
        uvicorn.run(
            "app.main:create_app",
            factory=True,
            host=args.host or settings.host,
            port=args.port or settings.port,
            workers=settings.workers,
            timeout_graceful_shutdown=settings.shutdown_grace_seconds,
            log_level=settings.log_level,
            log_config=_log_config(settings.log_level),
        )
    finally:
        if embedded is not None:
            embedded.stop()


def cmd_db(args: argparse.Namespace) -> None:
    from app import migrate

    url = get_settings().resolved_database_url
    if args.action == "upgrade":
        migrate.upgrade(url, args.revision or "head")
    elif args.action == "downgrade":
        if not args.revision:
            raise CliError("downgrade needs a revision (e.g. base)")
        migrate.downgrade(url, args.revision)
    print(f"database {args.action}d to {args.revision or 'head'}")


# ---- talking to a running service -----------------------------------------------------------------------


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


def _client(args: argparse.Namespace) -> httpx.Client:
    return httpx.Client(base_url=_service_url(args), headers={"Authorization": f"Bearer {_api_key(args)}"}, timeout=30)


def _call(client: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
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
    with _client(args) as client:
        if args.action == "install":
            path = Path(args.file)
            if not path.exists():
                raise CliError(f"no such file: {path}")
            media = "application/json" if path.suffix.lower() == ".json" else "application/yaml"
            result = _call(client, "PUT", "/v1/policy", content=path.read_bytes(), headers={"Content-Type": media}, params={"dry_run": args.dry_run})
            verb = "valid (dry run)" if args.dry_run else "installed and active" if result["changed"] else "unchanged: already active"
            print(f"policy {result['name']} version {result['version']}: {verb}")
        elif args.action == "show":
            response = client.get("/v1/policy", headers={"Accept": "application/yaml"})
            if response.status_code >= 400:
                _call(client, "GET", "/v1/policy")
            print(response.text, end="")
        elif args.action == "versions":
            for item in _call(client, "GET", "/v1/policy/versions")["items"]:
                print(f"{item['version']:>5}  {item['name']:<12} {item['installed_at']}  by {item['installed_by']}")


def cmd_keys(args: argparse.Namespace) -> None:
    with _client(args) as client:
        if args.action == "create":
            existing = client.get(f"/v1/principals/{args.principal}")
            if existing.status_code == 404:
                if not args.role:
                    raise CliError(f"principal {args.principal} does not exist yet: give its --role")
                _call(client, "POST", "/v1/principals", json={"name": args.principal, "roles": args.role, "permits": args.permit or []})
            elif args.role or args.permit:
                patch = {k: v for k, v in (("roles", args.role), ("permits", args.permit)) if v}
                _call(client, "PATCH", f"/v1/principals/{args.principal}", json=patch)
            created = _call(client, "POST", "/v1/api-keys", json={"principal": args.principal, "description": args.description})
            print(f"key {created['id']} for {created['principal']} (shown once):", file=sys.stderr)
            print(created["key"])
        elif args.action == "list":
            for item in _call(client, "GET", "/v1/api-keys")["items"]:
                state = "revoked" if item["revoked_at"] else "active"
                print(f"{item['id']}  {item['principal']:<20} {state:<8} {item['description']}")
        elif args.action == "revoke":
            _call(client, "DELETE", f"/v1/api-keys/{args.key_id}")
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
    with _client(args) as client:
        result = _call(client, "POST", "/v1/operator/commands", json=body)
    print(f"{result['command']}: {result['application_environment']} {result['previous_state']} -> {result['state']}")


def _display_table(items: list[dict[str, Any]]) -> list[str]:
    """Fixed-width columns, as wide as their longest value; the queued requests by class last, most important first."""
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
    header = ("NAME", "STATE", "SERVERS", "IN-FLIGHT", "QUEUED", "QUEUED BY CLASS")
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(len(header) - 1)]
    numeric = (False, False, True, True, True)
    lines = []
    for row in (header, *rows):
        cells = [cell.rjust(width) if right else cell.ljust(width) for cell, width, right in zip(row[:-1], widths, numeric, strict=True)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def cmd_display(args: argparse.Namespace) -> None:
    with _client(args) as client:
        result = _call(client, "GET", "/v1/application-environments", params={"name": args.pattern})
    if not result["items"]:
        print(f"{result['command']}: no application environment matches")
        return
    print(result["command"])
    for line in _display_table(result["items"]):
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
_LINK_ACTIONS = {"stop": {"stopped": True}, "start": {"stopped": None}}


def _explain_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"{result['application_environment']} from {result['queue_manager_node'] or 'no node'}: {result['reason']}"]
    for step in result["steps"]:
        gone = "; ".join(f"{e['node']}{' link ' + e['link'] if e['link'] else ''} ({e['reason']})" for e in step["eliminated"])
        lines.append(f"  step {step['step']:<5} {gone or '-'}")
    return lines


def cmd_route(args: argparse.Namespace) -> None:
    with _client(args) as client:
        if args.action == "explain":
            params = {"application_environment": args.application_environment, **({"queue_manager_node": args.origin} if args.origin else {})}
            print("\n".join(_explain_lines(_call(client, "GET", "/v1/routing/explain", params=params))))
            return
        if args.action == "nodes":
            nodes = _call(client, "GET", "/v1/routing/nodes")["items"]
        elif getattr(args, "link", None):
            nodes = [_call(client, "PATCH", f"/v1/routing/nodes/{args.node}/links/{args.link}", json=_link_changes(args))]
        else:
            changes = _NODE_ACTIONS.get(args.action) or {name: getattr(args, name) for name in _ALTERABLE if getattr(args, name) is not None}
            if not changes:
                raise CliError("name what to alter: " + ", ".join(f"--{name.replace('_', '-')}" for name in _ALTERABLE))
            nodes = [_call(client, "PATCH", f"/v1/routing/nodes/{args.node}", json=changes)]
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
    with _client(args) as client:
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
        summary = asyncio.run(demo.run(_service_url(args), _api_key(args), minutes=args.minutes, phase_seconds=args.phase_seconds))
    except demo.DemoError as exc:
        raise CliError(f"demo: {exc}") from None
    except KeyboardInterrupt:
        raise CliError("demo interrupted (its queue manager disconnected, its key revoked, PAYROLL not left quiesced)") from None
    print("\n".join(summary.lines()))


def cmd_report(args: argparse.Namespace) -> None:
    if args.action == "run":
        try:
            run_from_arguments(args)
        except JobFailed as failure:
            raise CliError(str(failure)) from None
        return
    hour, minute = args.at
    wlm = Path(sys.executable).with_name("wlm")
    data_dir = get_settings().data_dir.resolve()
    log = data_dir / "reports" / "workload_activity.log"
    print("# The nightly workload activity report of the day before (UTC). Add with `crontab -e`:")
    print(f"{minute} {hour} * * * cd {Path.cwd()} && WLM_DATA_DIR={data_dir} {wlm} report run --date yesterday >> {log} 2>&1")


def _time_of_day(text: str) -> tuple[int, int]:
    try:
        hour, minute = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time of day (HH:MM): {text!r}") from None
    if not (0 <= hour < 24 and 0 <= minute < 60):
        raise argparse.ArgumentTypeError(f"not a time of day (HH:MM): {text!r}")
    return hour, minute


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wlm", description="WLM: goal-oriented workload manager")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="migrate the database and serve the API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.set_defaults(func=cmd_serve)

    db = sub.add_parser("db", help="database schema migrations")
    db.add_argument("action", choices=["upgrade", "downgrade"])
    db.add_argument("revision", nargs="?")
    db.set_defaults(func=cmd_db)

    # Options of every command that talks to a running service.
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument("--url", help="service URL (default $WLM_URL or http://WLM_HOST:WLM_PORT)")
    remote.add_argument("--key", help="API key (default $WLM_API_KEY or data/admin.key)")
    remote.add_argument("--key-file", help="a file holding the API key (default data/admin.key, where `wlm serve` saved it)")

    policy = sub.add_parser("policy", help="install and read the service definition")
    policy_sub = policy.add_subparsers(dest="action", required=True)
    install = policy_sub.add_parser("install", parents=[remote], help="install and activate a YAML or JSON file")
    install.add_argument("file")
    install.add_argument("--dry-run", action="store_true", help="validate only")
    policy_sub.add_parser("show", parents=[remote], help="print the active definition as YAML")
    policy_sub.add_parser("versions", parents=[remote], help="list installed versions")
    policy.set_defaults(func=cmd_policy)

    keys = sub.add_parser("keys", help="API keys and principals")
    keys_sub = keys.add_subparsers(dest="action", required=True)
    create = keys_sub.add_parser("create", parents=[remote], help="create a key (and its principal if new)")
    create.add_argument("--principal", required=True)
    create.add_argument("--role", action="append", choices=["admin", "operator", "viewer", "queue_manager", "server"])
    create.add_argument("--permit", action="append", help="server resource profile, e.g. 'CB.*.PAYROLL'")
    create.add_argument("--description", default="")
    keys_sub.add_parser("list", parents=[remote], help="list keys")
    revoke = keys_sub.add_parser("revoke", parents=[remote], help="revoke a key")
    revoke.add_argument("key_id")
    keys.set_defaults(func=cmd_keys)

    vary = sub.add_parser(
        "vary",
        parents=[remote],
        help="quiesce, resume or refresh an application environment",
        description='wlm vary "VARY WLM,APPLENV=PAYROLL,QUIESCE"  or  wlm vary PAYROLL quiesce  (actions: quiesce, resume, refresh)',
    )
    vary.add_argument("words", nargs="+", metavar="COMMAND", help="the command text, or NAME ACTION")
    vary.add_argument("--dynamic", action="store_true", help="NAME is a dynamic application environment (DYNAPPL=)")
    vary.set_defaults(func=cmd_vary)

    display = sub.add_parser("display", parents=[remote], help="D WLM,APPLENV=pattern: states, servers and queued work")
    display.add_argument("pattern", nargs="?", default="*", help="a name or a pattern with * (default: all)")
    display.set_defaults(func=cmd_display)

    route = sub.add_parser("route", help="routing across nodes: why work goes where it goes, and the nodes' attributes")
    route_sub = route.add_subparsers(dest="action", required=True)
    explain = route_sub.add_parser("explain", parents=[remote], help="the algorithm's steps for a request to an environment")
    explain.add_argument("application_environment")
    explain.add_argument("--from", dest="origin", metavar="NODE", help="the node of the queue manager inserting it")
    route_sub.add_parser("nodes", parents=[remote], help="every node's routing attributes and link state")
    alter = route_sub.add_parser("alter", parents=[remote], help="change a node's routing attributes")
    alter.add_argument("node")
    alter.add_argument("--weight", type=int, help="CLWLWGHT 1-99")
    alter.add_argument("--network-priority", type=int, help="NETPRTY 0-9")
    alter.add_argument("--rank", type=int, help="CLWLRANK 0-9")
    alter.add_argument("--most-recently-used", type=int, help="CLWLMRUC")
    alter.add_argument("--use-queue", choices=("LOCAL", "ANY"), help="CLWLUSEQ")
    alter.add_argument("--link", help="alter this one of the node's links (its NETPRTY) instead of the node")
    for action, what in (("suspend", "suspend a node"), ("resume", "resume it")):
        route_sub.add_parser(action, parents=[remote], help=what).add_argument("node")
    for action, what in (("stop", "stop its links"), ("start", "start them")):
        link_action = route_sub.add_parser(action, parents=[remote], help=what)
        link_action.add_argument("node")
        link_action.add_argument("--link", help="only this one of the node's links")
    route.set_defaults(func=cmd_route)

    events = sub.add_parser("events", parents=[remote], help="follow the advisories (scheduler, backlog, states, servers)")
    events.add_argument("--subject", default=">", help="a subject pattern: * one element, > the rest (default: all)")
    events.add_argument("--since", help="replay from after this event id (0: every one kept)")
    events.set_defaults(func=cmd_events)

    demo = sub.add_parser(
        "demo",
        parents=[remote],
        help="drive minutes of changing work through PAYROLL to watch the manager on the dashboard",
        description="Installs the demo policy, queues Poisson arrivals of ONLINE, BATCH and REPORTS work in a mix that "
        "changes every phase, quiesces and resumes PAYROLL halfway, and prints progress and a summary.",
    )
    demo.add_argument("--minutes", type=float, default=5, help="how long work arrives (default 5)")
    demo.add_argument("--phase-seconds", type=float, default=60, help="how long each mix of work lasts (default 60)")
    demo.set_defaults(func=cmd_demo)

    report = sub.add_parser("report", help="the nightly workload activity report (PySpark)")
    report_sub = report.add_subparsers(dest="action", required=True)
    add_report_arguments(report_sub.add_parser("run", help="compute one day's report into Parquet and the database"))
    schedule = report_sub.add_parser("schedule", help="print the cron line that runs the report every night")
    schedule.add_argument("--at", type=_time_of_day, default=(0, 30), help="time of day (HH:MM, local to cron; default 00:30)")
    report.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except CliError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
