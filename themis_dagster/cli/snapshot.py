"""``themis snapshot``: a consistent copy of the warehouse for long read-only sessions (BI tools)."""

from __future__ import annotations

import argparse
from pathlib import Path

from themis_dagster.errors import ConfigError
from themis_dagster.settings import PROJECT_ROOT, Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    snap = subparsers.add_parser("snapshot", help="copy the warehouse for long read-only sessions (BI tools)")
    snap.add_argument("target", nargs="?", help="default: data/warehouse-snapshot.duckdb")
    snap.add_argument("--version", type=int, help="DuckLake only: copy this snapshot (default: the latest)")
    snap.set_defaults(func=cmd_snapshot)


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Write a consistent copy of the warehouse that BI tools can hold open without blocking runs."""
    from themis_dagster.warehouse import ducklake
    from themis_dagster.warehouse.file_snapshot import snapshot
    from themis_dagster.warehouse.lake_snapshot import snapshot_lake

    settings = Settings.from_env()
    if ducklake.is_ducklake(str(settings.warehouse)):  # the lake's own snapshot (default: the latest), as a file
        target = Path(args.target) if args.target else PROJECT_ROOT / "data" / "warehouse-snapshot.duckdb"
        path, version = snapshot_lake(str(settings.warehouse), target, args.version)
        print(f"{path} (DuckLake snapshot {version})")
        return 0
    if args.version is not None:
        raise ConfigError("themis snapshot --version: only a DuckLake warehouse has snapshot versions")
    target = Path(args.target) if args.target else settings.warehouse.with_name("warehouse-snapshot.duckdb")
    print(snapshot(settings.warehouse, target))
    return 0
