"""`wlm db upgrade|downgrade [REVISION]`: the database schema's migrations."""

from __future__ import annotations

import argparse

from app.cli.errors import CliError
from app.config import get_settings


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
