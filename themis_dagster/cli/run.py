"""``themis run``: evaluate a model on tasks in this process, one Dagster run per task (and per judge calibration)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from themis_dagster.cli import common
from themis_dagster.cli.common import (
    QUIET_LOGS,
    ensure_dagster_home,
    judge_calibrations,
    print_leaderboard,
    print_perturbation_effects,
    tasks_with_data,
)
from themis_dagster.cli.interrupts import Interrupted, Interruptions
from themis_dagster.errors import ConfigError
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.settings import Settings

if TYPE_CHECKING:
    from themis_dagster.cli.budgeting import RunWork


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser("run", help="evaluate a model on tasks (default: the default model on every task)")
    run.add_argument("--model", default=DEFAULT_MODEL_ID)
    run.add_argument(
        "--task",
        action="append",
        help="a task name (repeatable); default: every task, and the variants the task overrides file declares",
    )
    run.add_argument("--skip-reports", action="store_true", help="do not rebuild the leaderboard and reports")
    run.add_argument(
        "--no-calibrate-judges",
        dest="calibrate_judges",
        action="store_false",
        help="do not calibrate the tasks' judge models first (judge_calibration: make run's profile makes the "
        "default model BOLD's regard judge, checked on the 301 regard texts); their judged metrics then say "
        "'uncalibrated judge' unless a calibration is already stored",
    )
    run.add_argument(
        "--budget-minutes",
        type=float,
        default=None,
        help="end within about this many minutes: each task evaluates a share of its profile size, chosen from the "
        "speed measured as the run goes (tasks/budget.py); default THEMIS_RUN_BUDGET_MINUTES, unset: no budget",
    )
    run.add_argument(
        "--budget-since",
        type=float,
        metavar="EPOCH_SECONDS",
        help="count the budget from this moment (Unix time) instead of from this command's start: make run "
        "passes the time make started, so that the setup before it is inside the budget",
    )
    run.set_defaults(func=cmd_run)


def _budget_from_env() -> float | None:
    value = os.environ.get("THEMIS_RUN_BUDGET_MINUTES", "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"THEMIS_RUN_BUDGET_MINUTES={value!r}: expected a number of minutes") from None


def cmd_run(args: argparse.Namespace) -> int:
    from dagster import DagsterInstance

    from themis_dagster.cli.budgeting import BudgetedProfile, prepare_weights, say_plan
    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import calibration_key, register_models
    from themis_dagster.resources.engine import shutdown_warm_engines
    from themis_dagster.runs.orphans import fail_dead_runs
    from themis_dagster.runs.owner import owner_tags
    from themis_dagster.runs.pools import ENGINE_POOL, engine_pool_in_use, ensure_engine_pool_limit
    from themis_dagster.tasks.budget import summary as budget_summary
    from themis_dagster.tasks.loader import evaluation_tasks, validate_plan

    started_run = time.perf_counter()
    if args.budget_since is not None:  # the setup make ran first counts too
        started_run -= max(0.0, time.time() - args.budget_since)
    settings = Settings.from_env()
    tasks = args.task or evaluation_tasks(settings)  # each variant (<task>__<perturbation>) right after its task
    validate_plan(settings, args.model, tasks)
    if not args.task:  # "every task": skip, and say so, those whose data is not available here
        tasks, missing = tasks_with_data(settings, tasks)
        for task, reason in missing.items():
            print(f"[themis] skipping {task}: {reason}", file=sys.stderr)
    minutes = args.budget_minutes if args.budget_minutes is not None else _budget_from_env()
    budgeted = BudgetedProfile(settings, minutes) if minutes is not None else None
    if budgeted is not None:
        settings = budgeted.settings  # the run reads each task's size from the budget's copy of the profile
    ensure_dagster_home()
    instance = DagsterInstance.get()
    for run_id in fail_dead_runs(instance):  # killed earlier: schedules and sensors may now retry them
        print(f"[themis] run {run_id} was left unfinished by a process that is gone: marked failed", file=sys.stderr)
    if ensure_engine_pool_limit(instance):
        print(f"[themis] the {ENGINE_POOL!r} pool had no limit on this instance: set to 1 engine at a time "
              f"(dagster instance concurrency set {ENGINE_POOL} N to change)", file=sys.stderr)  # fmt: skip
    calibrations = judge_calibrations(settings, tasks) if args.calibrate_judges else []
    models = list(dict.fromkeys([args.model, *(judge for judge, _ in calibrations)]))
    register_models(instance, models)
    if budgeted is not None:
        prepare_weights(settings, models)
    defs = build_definitions(settings, keep_warm=True)
    job = defs.resolve_job_def("evaluate")
    failed: list[str] = []
    current = "the judge calibrations"
    with Interruptions() as stops:
        try:
            # judges first: a task's bias_metrics reports its judged metrics beside the calibration it finds
            for judge, calibration_set in calibrations:
                current = f"judge_calibration {calibration_set}|{judge}"
                calibrated, work = _calibrate(
                    defs, instance, judge, calibration_set, calibration_key(judge, calibration_set)
                )
                failed += calibrated
                if budgeted is not None:
                    budgeted.observe_calibration(calibration_set, work)
                stops.check(current)
            if budgeted is not None:
                say_plan(budgeted, tasks, time.perf_counter() - started_run)
            for index, task in enumerate(tasks):
                current = f"{args.model}|{task}"
                if budgeted is not None:
                    budgeted.plan(task, tasks[index:], time.perf_counter() - started_run)
                ok, work = _evaluate(job, instance, args.model, task)
                if not ok:
                    failed.append(task)
                elif budgeted is not None:
                    budgeted.observe(task, work)
                stops.check(current)
                if engine_pool_in_use(instance):  # another run waits for (or holds) the engine pool:
                    shutdown_warm_engines()  # do not keep a second engine in memory (one GPU) meanwhile
            if not args.skip_reports:
                current = "the reports"
                run_id = str(uuid.uuid4())
                reports_started = time.perf_counter()
                reports = defs.resolve_job_def("reports").execute_in_process(
                    instance=instance, run_config=QUIET_LOGS, run_id=run_id, tags=owner_tags(run_id)
                )
                status = "ok" if reports.success else "FAILED"
                print(f"[themis] reports: {status} in {time.perf_counter() - reports_started:.1f} s", flush=True)
                stops.check(current)
        except KeyboardInterrupt:  # a signal outside Dagster's steps (between tasks, while loading)
            stops.stopping()
            seen = stops.received()
            interrupted: Interrupted | None = Interrupted(seen[0] if seen else signal.SIGINT, current)
        except Interrupted as stopped:
            interrupted = stopped
        else:
            interrupted = None
        finally:
            started = time.perf_counter()
            shutdown_warm_engines(process_exiting=common.QUICK_EXIT)
            print(f"[themis] engines shut down in {time.perf_counter() - started:.1f} s", flush=True)
            if budgeted is not None:
                budgeted.close()
    if interrupted is not None:
        print(
            f"[themis] {interrupted}: stopped; the answers committed so far are kept, and running the same "
            "command again sends only what was not answered",
            file=sys.stderr,
            flush=True,
        )
        return interrupted.exit_code
    if not args.skip_reports:
        print_leaderboard(settings.warehouse)
    print_perturbation_effects(settings.warehouse, args.model, [task for task in tasks if task not in failed])
    if budgeted is not None:
        for line in budget_summary(budgeted.budget, tasks):
            print(f"[themis] {line}", flush=True)
    if failed:
        print(f"[themis] failed tasks: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _evaluate(job: Any, instance: Any, model: str, task: str) -> tuple[bool, RunWork]:
    """One Dagster run of the ``evaluate`` job for ``model|task``; prints its outcome and engine times."""
    from themis_dagster.cli.budgeting import run_work
    from themis_dagster.partitions import evaluation_key
    from themis_dagster.runs.owner import owner_tags

    started = time.perf_counter()
    run_id = str(uuid.uuid4())
    result = job.execute_in_process(
        partition_key=evaluation_key(model, task),
        instance=instance,
        raise_on_error=False,
        run_config=QUIET_LOGS,
        run_id=run_id,
        tags=owner_tags(run_id),  # from its creation, so a kill at any point is recognised (runs.orphans)
    )
    status = "ok" if result.success else "FAILED"
    engine_note = ""
    for event in result.asset_materializations_for_node("raw_responses"):
        meta = event.metadata
        load = meta.get("engine_load_seconds")
        engine_note = f" (engine: load {load.value if load else 0} s, inference {meta['engine_seconds'].value} s)"
    elapsed = time.perf_counter() - started
    print(f"[themis] {model}|{task}: {status} in {elapsed:.1f} s{engine_note}", flush=True)
    return bool(result.success), run_work(result, elapsed)


def _calibrate(
    defs: Any, instance: Any, judge: str, calibration_set: str, partition_key: Any
) -> tuple[list[str], RunWork]:
    """Run ``calibrate_judge`` for one judge and set; print its kappa. Returns ``[what failed]`` or ``[]``."""
    from themis_dagster.cli.budgeting import run_work
    from themis_dagster.runs.owner import owner_tags

    started = time.perf_counter()
    run_id = str(uuid.uuid4())
    result = defs.resolve_job_def("calibrate_judge").execute_in_process(
        partition_key=partition_key,
        instance=instance,
        raise_on_error=False,
        run_config=QUIET_LOGS,
        run_id=run_id,
        tags=owner_tags(run_id),
    )
    kappa = ""
    for event in result.asset_materializations_for_node("judge_calibration"):
        if "kappa" in event.metadata:
            kappa = f", Cohen's kappa {event.metadata['kappa'].value:.3f}"
    status = "ok" if result.success else "FAILED"
    elapsed = time.perf_counter() - started
    work = run_work(result, elapsed)
    load = f" (engine: load {work.load_s} s)" if work.load_s else ""
    print(
        f"[themis] judge {judge} on calibration set {calibration_set}: {status} in {elapsed:.1f} s{load}{kappa}",
        flush=True,
    )
    return ([] if result.success else [f"judge_calibration {calibration_set}|{judge}"]), work
