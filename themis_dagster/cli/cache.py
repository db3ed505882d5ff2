"""``themis cache``: show or clear the request cache (answers by request fingerprint, reused across runs)."""

from __future__ import annotations

import argparse

from themis_dagster.cli.common import warehouse_resource
from themis_dagster.errors import ConfigError
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = subparsers.add_parser("cache", help="show or clear the request cache (answers reused across runs)")
    cache.add_argument("action", choices=["stats", "clear"])
    cache.add_argument("--model", help="only this model's cached answers")
    cache.set_defaults(func=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    """Show or clear the request cache (answers by request fingerprint, reused across runs)."""
    from themis_dagster.registry.model_id import InvalidModelIdError, validate_model_id
    from themis_dagster.warehouse.read.cache import cache_stats

    if args.model:
        try:
            validate_model_id(args.model)
        except InvalidModelIdError as error:
            raise ConfigError(str(error)) from None
    where, values = ("WHERE model = ?", [args.model]) if args.model else ("", [])
    with warehouse_resource(Settings.from_env()).connect() as conn:
        if args.action == "clear":
            row = conn.execute(f"DELETE FROM request_cache {where} RETURNING 1", values).fetchall()  # noqa: S608
            print(f"cleared {len(row)} cached answers" + (f" of {args.model}" if args.model else ""))
            return 0
        frame = cache_stats(conn, args.model)
    print(frame.to_string(index=False) if not frame.empty else "(the request cache is empty)")
    return 0
