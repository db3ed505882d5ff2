"""``themis leaderboard``: print the leaderboard."""

from __future__ import annotations

import argparse

from themis_dagster.cli.common import print_leaderboard
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    board = subparsers.add_parser("leaderboard", help="print the leaderboard")
    board.set_defaults(func=cmd_leaderboard)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    print_leaderboard(Settings.from_env().warehouse)
    return 0
