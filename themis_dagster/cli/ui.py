"""``themis ui``: the interactive explorer beside Dagster's UI, read-only on the warehouse."""

from __future__ import annotations

import argparse
from typing import NoReturn


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ui``; it binds to 127.0.0.1 unless told otherwise."""
    from themis_dagster.explorer.launch import DEFAULT_HOST, DEFAULT_PORT

    ui = sub.add_parser("ui", help="the interactive explorer (Streamlit) beside Dagster's UI; reads the warehouse")
    ui.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST}: this host only)")
    ui.add_argument("--port", type=int, default=DEFAULT_PORT)
    ui.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> NoReturn:
    """Serve the explorer (replaces this process with the Streamlit server)."""
    from themis_dagster.explorer.launch import serve

    serve(args.host, args.port)
