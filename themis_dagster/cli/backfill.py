"""``themis backfill``: queue an asset backfill for the Dagster daemon, as the UI does."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from themis_dagster.cli.common import ensure_dagster_home, register_models, tasks_with_data, validate_plan
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backfill = subparsers.add_parser("backfill", help="backfill a model across tasks through the Dagster daemon")
    backfill.add_argument("--model", required=True)
    backfill.add_argument("--task", action="append", help="a task name (repeatable); default: every task")
    backfill.add_argument("--wait", action="store_true", help="wait until the backfill finishes")
    backfill.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait with --wait")
    backfill.set_defaults(func=cmd_backfill)


def submit_backfill(instance: object, model: str, tasks: Sequence[str], title: str | None = None) -> str:
    """Queue an asset backfill of the evaluation chain for ``model`` x ``tasks`` for the daemon.

    This is what the UI's "Materialize partitions" dialog does (GraphQL
    ``launchPartitionBackfill``): the daemon then launches one run per partition.
    """
    from dagster import DagsterInstance
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    from themis_dagster.assets import evaluation_assets
    from themis_dagster.definitions import defs
    from themis_dagster.partitions import evaluation_key

    assert isinstance(instance, DagsterInstance)
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(),
        asset_graph=defs.resolve_asset_graph(),
        partition_names=[str(evaluation_key(model, task)) for task in tasks],
        asset_selection=[asset.key for asset in evaluation_assets],
        backfill_timestamp=time.time(),
        tags={"themis/backfill_model": model},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=title or f"evaluate {model} on {len(tasks)} task(s)",
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


def cmd_backfill(args: argparse.Namespace) -> int:
    """Backfill a model across tasks through the daemon (runs show up in the UI as a backfill)."""
    from dagster import DagsterInstance
    from dagster._core.execution.backfill import BulkActionStatus

    from themis_dagster.tasks.loader import task_names

    settings = Settings.from_env()
    tasks = args.task or task_names()
    validate_plan(settings, args.model, tasks)
    if not args.task:
        tasks, missing = tasks_with_data(settings, tasks)
        for task, reason in missing.items():
            print(f"[themis] skipping {task}: {reason}", file=sys.stderr)
    ensure_dagster_home()
    instance = DagsterInstance.get()
    register_models(instance, [args.model])
    backfill_id = submit_backfill(instance, args.model, tasks)
    print(f"backfill {backfill_id}: {args.model} x {len(tasks)} task(s) queued for the daemon", flush=True)
    if not args.wait:
        return 0
    deadline = time.monotonic() + args.timeout
    terminal = {BulkActionStatus.COMPLETED_SUCCESS, BulkActionStatus.COMPLETED_FAILED, BulkActionStatus.FAILED,
                BulkActionStatus.CANCELED, BulkActionStatus.COMPLETED}  # fmt: skip
    while time.monotonic() < deadline:
        backfill = instance.get_backfill(backfill_id)
        if backfill is not None and backfill.status in terminal:
            print(f"backfill {backfill_id}: {backfill.status.value}")
            return 0 if backfill.status in (BulkActionStatus.COMPLETED_SUCCESS, BulkActionStatus.COMPLETED) else 1
        time.sleep(5)
    print(f"backfill {backfill_id}: still running after {args.timeout} s (is the daemon running?)", file=sys.stderr)
    return 1
