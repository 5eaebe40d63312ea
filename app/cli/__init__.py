"""The `wlm` command: serve the API, migrate the database, talk to a running service as an admin (client.py), and
run the nightly report (report.py) and the what-if replay (whatif.py). The console script `wlm` calls `main`."""

from __future__ import annotations

import argparse
import gc
import sys

from app.cli import dead, whatif, work
from app.cli.client import cmd_demo, cmd_display, cmd_events, cmd_keys, cmd_policy, cmd_route, cmd_vary
from app.cli.db import cmd_db
from app.cli.errors import CliError
from app.cli.report import cmd_report, time_of_day
from app.cli.serve import cmd_serve
from spark_jobs.workload_activity.arguments import add_arguments as add_report_arguments


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

    dead.add_parser(sub, remote)
    work.add_parser(sub, remote)

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
    schedule.add_argument("--at", type=time_of_day, default=(0, 30), help="time of day (HH:MM, local to cron; default 00:30)")
    report.set_defaults(func=cmd_report)

    whatif.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except CliError as exc:
        print(exc, file=sys.stderr)
        return exc.status
    finally:
        # The interpreter's exit collects every object the imports made: 0.24 s of a report's run (pandas', SQLAlchemy's,
        # the CLI's own), 0.04 s frozen. What must be finished (files, the database, the JVM) is closed by its owner.
        gc.freeze()
    return 0
