"""``themis sql``: read-only SQL against the warehouse."""

from __future__ import annotations

import argparse
import sys

import duckdb

from themis_dagster.settings import Settings
from themis_dagster.warehouse.readonly import DEFAULT_WAIT_S


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sql = subparsers.add_parser("sql", help="run read-only SQL (SELECT, DESCRIBE, SHOW, EXPLAIN) against the warehouse")
    sql.add_argument("query")
    sql.add_argument("--format", choices=["text", "csv"], default="text")
    sql.add_argument("--wait", type=float, default=DEFAULT_WAIT_S, help="seconds to retry while a run writes")
    sql.set_defaults(func=cmd_sql)


def cmd_sql(args: argparse.Namespace) -> int:
    """Run read-only statements against the warehouse and print the last one's result.

    Writes, files outside the warehouse, other databases and extensions are refused
    (themis_dagster.warehouse.readonly); while a run holds the warehouse for writing, the
    connection is retried for ``--wait`` seconds.
    """
    from themis_dagster.warehouse.readonly import RefusedQuery, WarehouseBusy, query_read_only

    settings = Settings.from_env()
    try:
        frame = query_read_only(settings.warehouse, args.query, wait_s=args.wait)
    except (RefusedQuery, WarehouseBusy) as error:
        print(f"themis sql: {error}", file=sys.stderr)
        return 2
    except duckdb.Error as error:
        print(f"themis sql: {error}", file=sys.stderr)
        return 1
    print(frame.to_string(index=False) if args.format == "text" else frame.to_csv(index=False), end="\n")
    return 0
