"""``themis leaderboard``: print the leaderboard."""

from __future__ import annotations

import argparse
import sys

from themis_dagster.cli.common import print_leaderboard
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    board = subparsers.add_parser("leaderboard", help="print the leaderboard")
    board.set_defaults(func=cmd_leaderboard)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Print the leaderboard; a warehouse from an older schema is named with what to run (exit 2)."""
    from themis_dagster.warehouse.read.query import OlderSchemaError

    warehouse = Settings.from_env().warehouse
    try:
        print_leaderboard(warehouse)
    except OlderSchemaError as error:
        print(f"themis leaderboard: {str(error).replace('WAREHOUSE', str(warehouse))}", file=sys.stderr)
        return 2
    return 0
