"""``themis backfill``: queue an asset backfill for the Dagster daemon, as the UI does."""

from __future__ import annotations

import argparse
import sys
import time

from themis_dagster.cli.common import ensure_dagster_home, tasks_with_data
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backfill = subparsers.add_parser("backfill", help="backfill a model across tasks through the Dagster daemon")
    backfill.add_argument("--model", required=True)
    backfill.add_argument("--task", action="append", help="a task name (repeatable); default: every task")
    backfill.add_argument("--wait", action="store_true", help="wait until the backfill finishes")
    backfill.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait with --wait")
    backfill.set_defaults(func=cmd_backfill)


def cmd_backfill(args: argparse.Namespace) -> int:
    """Backfill a model across tasks through the daemon (runs show up in the UI as a backfill)."""
    from dagster import DagsterInstance
    from dagster._core.execution.backfill import BulkActionStatus

    from themis_dagster.backfills import queue_evaluation
    from themis_dagster.tasks.loader import task_names, validate_plan

    settings = Settings.from_env()
    tasks = args.task or task_names()
    validate_plan(settings, args.model, tasks)
    if not args.task:
        tasks, missing = tasks_with_data(settings, tasks)
        for task, reason in missing.items():
            print(f"[themis] skipping {task}: {reason}", file=sys.stderr)
    ensure_dagster_home()
    instance = DagsterInstance.get()
    backfill_id = queue_evaluation(instance, args.model, tasks)
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
