"""``themis``: run evaluations, manage models and query the warehouse from a terminal.

``themis run`` executes the same Dagster job the UI launches, one in-process run per
task, recorded in the Dagster instance (so ``dagster dev`` shows them), with the
engine loaded once for all tasks of a model.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import duckdb

from themis_dagster.errors import ConfigError
from themis_dagster.registry.models import DEFAULT_MODEL_ID, get_model, load_registry
from themis_dagster.settings import PROJECT_ROOT, Settings
from themis_dagster.warehouse.readonly import DEFAULT_WAIT_S

if TYPE_CHECKING:
    from themis_dagster.resources import WarehouseResource

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
_QUICK_EXIT = False  # set by console_main: the process ends with os._exit after main()


def ensure_dagster_home() -> Path:
    """Use ``$DAGSTER_HOME`` or the project's ``.dagster_home`` (created with the shipped settings)."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT / ".dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    shipped = PROJECT_ROOT / "dagster.yaml"
    target = home / "dagster.yaml"
    if shipped.is_file() and not target.exists():
        target.write_text(shipped.read_text())
    return home


def register_models(instance: object, model_ids: Sequence[str]) -> list[str]:
    """Add validated model ids as ``models`` partitions; returns the ones that were new."""
    from dagster import DagsterInstance

    from themis_dagster.partitions import MODELS_PARTITION
    from themis_dagster.registry.model_id import validate_model_id

    assert isinstance(instance, DagsterInstance)
    for model_id in model_ids:
        validate_model_id(model_id)
    existing = set(instance.get_dynamic_partitions(MODELS_PARTITION))
    new = [model_id for model_id in model_ids if model_id not in existing]
    if new:
        instance.add_dynamic_partitions(MODELS_PARTITION, new)
    return new


def validate_plan(settings: Settings, model_id: str, tasks: Sequence[str]) -> None:
    """Fail fast, before any engine starts: models file, model id, task names and parameters."""
    from themis_dagster.tasks.loader import load_overrides, load_task

    models = load_registry(settings.models_file, settings.discovered_models_file)
    get_model(models, model_id)
    overrides = load_overrides(settings.task_overrides_file)
    for task in tasks:
        if judge_model := load_task(task, overrides.get(task)).judge_model:
            get_model(models, judge_model)


def tasks_with_data(settings: Settings, tasks: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Split tasks into those whose benchmark files can be found (or fetched) and those that cannot."""
    from themis_dagster.tasks.loader import tasks_with_local_data

    return tasks_with_local_data(list(tasks), settings.datasets_dir, settings.cache_dir, allow_download=True)


def _warehouse(settings: Settings) -> WarehouseResource:
    """The warehouse resource the settings name (a DuckDB file, or a DuckLake database with its data path)."""
    from themis_dagster.resources import WarehouseResource

    return WarehouseResource(
        database=str(settings.warehouse),
        data_path=settings.warehouse_data_path,
        lock_timeout_s=settings.warehouse_lock_timeout_s,
    )


def print_leaderboard(warehouse: Path, out: TextIO | None = None) -> None:
    """Print the leaderboard table, read through the read-only door (a DuckDB file or a DuckLake warehouse)."""
    from themis_dagster.warehouse.readonly import connect_read_only

    with connect_read_only(warehouse) as conn:
        frame = conn.execute(
            "SELECT task, metric, rank, model, round(value, 4) AS value, "
            "round(ci_low, 4) AS ci_low, round(ci_high, 4) AS ci_high, n, ideal "
            "FROM leaderboard ORDER BY task, metric, rank, model"
        ).df()
    print(frame.to_string(index=False) if not frame.empty else "(leaderboard is empty)", file=out or sys.stdout)


def cmd_run(args: argparse.Namespace) -> int:
    from dagster import DagsterInstance

    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import evaluation_key
    from themis_dagster.resources.engine import shutdown_warm_engines
    from themis_dagster.runs.orphans import fail_dead_runs
    from themis_dagster.runs.owner import owner_tags
    from themis_dagster.runs.pools import ENGINE_POOL, engine_pool_in_use, ensure_engine_pool_limit
    from themis_dagster.tasks.loader import task_names

    settings = Settings.from_env()
    tasks = args.task or task_names()
    validate_plan(settings, args.model, tasks)
    if not args.task:  # "every task": skip, and say so, those whose data is not available here
        tasks, missing = tasks_with_data(settings, tasks)
        for task, reason in missing.items():
            print(f"[themis] skipping {task}: {reason}", file=sys.stderr)
    ensure_dagster_home()
    instance = DagsterInstance.get()
    for run_id in fail_dead_runs(instance):  # killed earlier: schedules and sensors may now retry them
        print(f"[themis] run {run_id} was left unfinished by a process that is gone: marked failed", file=sys.stderr)
    if ensure_engine_pool_limit(instance):
        print(f"[themis] the {ENGINE_POOL!r} pool had no limit on this instance: set to 1 engine at a time "
              f"(dagster instance concurrency set {ENGINE_POOL} N to change)", file=sys.stderr)  # fmt: skip
    register_models(instance, [args.model])
    defs = build_definitions(settings, keep_warm=True)
    job = defs.resolve_job_def("evaluate")
    failed = []
    try:
        for task in tasks:
            started = time.perf_counter()
            run_id = str(uuid.uuid4())
            result = job.execute_in_process(
                partition_key=evaluation_key(args.model, task),
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
                engine_note = (
                    f" (engine: load {load.value if load else 0} s, inference {meta['engine_seconds'].value} s)"
                )
            elapsed = time.perf_counter() - started
            print(f"[themis] {args.model}|{task}: {status} in {elapsed:.1f} s{engine_note}", flush=True)
            if not result.success:
                failed.append(task)
            if engine_pool_in_use(instance):  # another run waits for (or holds) the engine pool:
                shutdown_warm_engines()  # do not keep a second engine in memory (one GPU) meanwhile
        if not args.skip_reports:
            run_id = str(uuid.uuid4())
            defs.resolve_job_def("reports").execute_in_process(
                instance=instance, run_config=QUIET_LOGS, run_id=run_id, tags=owner_tags(run_id)
            )
    finally:
        started = time.perf_counter()
        shutdown_warm_engines(process_exiting=_QUICK_EXIT)
        print(f"[themis] engines shut down in {time.perf_counter() - started:.1f} s", flush=True)
    if not args.skip_reports:
        print_leaderboard(settings.warehouse)
    if failed:
        print(f"[themis] failed tasks: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


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


def _imported(args: argparse.Namespace, settings: Settings) -> tuple[str, object, str, str]:
    """(stored task, replies, dataset sha256, finish_reason) for ``themis import``; raises ImportValidationError."""
    from themis_dagster.datasets import resolve_file
    from themis_dagster.importers import ImportValidationError
    from themis_dagster.importers.bbq import import_predictions
    from themis_dagster.importers.iat import import_replies
    from themis_dagster.importers.replies import import_task_replies
    from themis_dagster.resources import ThemisConfig
    from themis_dagster.tasks.bbq.generate import R_IMPORT

    paths = [Path(p) for p in args.files]
    if args.task != "bbq" and args.column is not None:
        raise ImportValidationError([f"--column: only for 'themis import bbq' (task {args.task!r})"])
    if args.task == "iat":
        files = {
            name: resolve_file("iat", name, datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir)
            for name in ("iat_stimuli.csv", "iat_stimuli_synonym.csv")
        }
        imported = import_replies(paths, {name: f.path for name, f in files.items()})
        return "iat", imported, "+".join(f.sha256 for f in files.values()), "imported"
    themis = ThemisConfig(
        models_file=str(settings.models_file),
        datasets_dir=str(settings.datasets_dir),
        cache_dir=str(settings.cache_dir),
        models_dir=str(settings.models_dir),
        task_overrides_file=str(settings.task_overrides_file or ""),
    )
    if args.task == "bbq":
        if not args.column:
            raise ImportValidationError(
                ["--column: required for 'themis import bbq' (e.g. unifiedqa-t5-11b_pred_race)"]
            )
        task = themis.task("bbq_generate")
        imported = import_predictions(
            paths, args.column, lambda items: task.module.build_requests(items, task.params, task.templates)
        )
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()
        return "bbq_generate", imported, digest, R_IMPORT
    task = themis.task(args.task)
    resolved = themis.dataset_files(task)
    imported = import_task_replies(task, {name: f.path for name, f in resolved.items()}, paths)
    return args.task, imported, "+".join(f.sha256 for f in resolved.values()), "imported"


def cmd_import(args: argparse.Namespace) -> int:
    """Load replies produced elsewhere as a model's raw responses, then score them like our own."""
    from dagster import AssetKey, AssetSelection, DagsterInstance

    from themis_dagster.definitions import build_definitions
    from themis_dagster.importers import ImportedReplies, ImportValidationError
    from themis_dagster.importers.store import ensure_model_registered, record_import, store_imported
    from themis_dagster.partitions import evaluation_key
    from themis_dagster.registry.model_id import InvalidModelIdError, validate_model_id
    from themis_dagster.tasks.loader import task_names

    settings = Settings.from_env()
    try:
        validate_model_id(args.model)
    except InvalidModelIdError as error:
        print(f"themis import: {error}", file=sys.stderr)
        return 2
    if args.task not in ("iat", "bbq") and args.task not in task_names():
        print(f"themis import: unknown task {args.task!r} (iat, bbq or a task name)", file=sys.stderr)
        return 2
    paths = [Path(p) for p in args.files]
    try:
        task, imported, dataset_sha256, finish_reason = _imported(args, settings)
    except (ImportValidationError, ConfigError) as error:
        print(f"themis import: nothing was written.\n{error}", file=sys.stderr)
        return 2
    assert isinstance(imported, ImportedReplies)
    origin = f"{len(paths)} file(s) in {os.path.commonpath([str(p.resolve().parent) for p in paths])}"
    added = ensure_model_registered(settings, args.model, origin)
    ensure_dagster_home()
    instance = DagsterInstance.get()
    register_models(instance, [args.model])
    warehouse = _warehouse(settings)
    with warehouse.connect() as conn:
        counts = store_imported(conn, args.model, task, imported, dataset_sha256, finish_reason)
    record_import(instance, args.model, task, paths, counts)
    defs = build_definitions(settings)
    scoring = AssetSelection.assets(AssetKey("judgments"), AssetKey("bias_metrics"))
    result = defs.resolve_job_def("evaluate").execute_in_process(
        partition_key=evaluation_key(args.model, task),
        instance=instance,
        asset_selection=list(scoring.resolve(defs.resolve_asset_graph())),
        run_config=QUIET_LOGS,
        raise_on_error=False,
    )
    defs.resolve_job_def("reports").execute_in_process(instance=instance, run_config=QUIET_LOGS)
    print(f"imported {counts['responses']} replies for {args.model} into {task}{' (new model)' if added else ''}; "
          f"scoring {'ok' if result.success else 'FAILED'}")  # fmt: skip
    return 0 if result.success else 1


def cmd_models(args: argparse.Namespace) -> int:
    from themis_dagster.registry.weights import resolve_weights

    settings = Settings.from_env()
    models = load_registry(settings.models_file, settings.discovered_models_file)
    if args.action == "list":
        for spec in models.values():
            print(f"{spec.id}\t{spec.source.kind}\t{spec.description}")
    elif args.action == "prepare":
        for model_id in args.ids or list(models):
            weights = resolve_weights(get_model(models, model_id), settings.models_dir, settings.cache_dir)
            print(f"{model_id}\t{weights.path}\t{weights.weights_sha256}")
    elif args.action == "register":
        from dagster import DagsterInstance

        ensure_dagster_home()
        ids = args.ids or list(models)
        for model_id in ids:
            get_model(models, model_id)
        new = register_models(DagsterInstance.get(), ids)
        print(f"registered {len(new)} new model partition(s): {', '.join(new) or '-'}")
    return 0


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


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Write a consistent copy of the warehouse that BI tools can hold open without blocking runs."""
    from themis_dagster.warehouse import ducklake, snapshot
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


def cmd_cache(args: argparse.Namespace) -> int:
    """Show or clear the request cache (answers by request fingerprint, reused across runs)."""
    from themis_dagster.registry.model_id import InvalidModelIdError, validate_model_id

    if args.model:
        try:
            validate_model_id(args.model)
        except InvalidModelIdError as error:
            raise ConfigError(str(error)) from None
    where, values = ("WHERE model = ?", [args.model]) if args.model else ("", [])
    with _warehouse(Settings.from_env()).connect() as conn:
        if args.action == "clear":
            row = conn.execute(f"DELETE FROM request_cache {where} RETURNING 1", values).fetchall()  # noqa: S608
            print(f"cleared {len(row)} cached answers" + (f" of {args.model}" if args.model else ""))
            return 0
        frame = conn.execute(
            f"SELECT model, count(*) AS answers, min(cached_at) AS first, max(cached_at) AS last "  # noqa: S608
            f"FROM request_cache {where} GROUP BY model ORDER BY model",
            values,
        ).df()
    print(frame.to_string(index=False) if not frame.empty else "(the request cache is empty)")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    print_leaderboard(Settings.from_env().warehouse)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare model A with baseline B on every task both have (or ``--task``): paired tests, Holm, gates.

    Exit codes: 0 compared (and, with ``--gate``, nothing regressed); 1 a gated regression
    with ``--gate``; 2 bad input (unknown model or task, incomparable evaluations, no items
    in common, a bad gate file), reported before anything is written.
    """
    from themis_dagster.comparisons.gates import load_gates
    from themis_dagster.comparisons.paired import ComparisonError
    from themis_dagster.comparisons.store import common_tasks, run_comparisons
    from themis_dagster.tasks.loader import load_overrides, load_task

    settings = Settings.from_env()
    models = load_registry(settings.models_file, settings.discovered_models_file)
    for model_id in (args.model, args.baseline):
        get_model(models, model_id)
    gates = load_gates()
    overrides = load_overrides(settings.task_overrides_file)
    warehouse = _warehouse(settings)
    with warehouse.connect() as conn:
        names = args.task or common_tasks(conn, args.model, args.baseline)
        if not names:
            print(f"themis compare: {args.model} and {args.baseline} have no evaluated task in common", file=sys.stderr)
            return 2
        tasks = [load_task(name, overrides.get(name)) for name in names]
        try:
            view, verdicts, notes = run_comparisons(
                conn, tasks, args.model, args.baseline, gates, origin="requested", run_id=f"cli-{os.getpid()}"
            )
        except ComparisonError as error:
            print(f"themis compare: {error}", file=sys.stderr)
            return 2
    with_pandas = view.to_pandas()
    print(with_pandas.to_string(index=False) if not with_pandas.empty else "(no comparable metrics)")
    for note in notes:
        print(f"note: {note}")
    regressed = verdicts.filter(verdicts["regressed"])
    print(f"gates: {verdicts.height} gated metric(s), {regressed.height} regressed")
    for row in regressed.iter_rows(named=True):
        print(f"REGRESSED {row['task']}.{row['metric']}: difference {row['difference']:+.4f}, "
              f"p_adjusted {row['p_adjusted']:.4g} (margin {row['margin']}, alpha {row['alpha']})")  # fmt: skip
    return 1 if args.gate and regressed.height else 0


def add_ui_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``themis ui``: the explorer (themis_dagster/explorer), read-only on the warehouse, on 127.0.0.1 by default."""
    from themis_dagster.explorer.launch import DEFAULT_HOST, DEFAULT_PORT, serve

    ui = sub.add_parser("ui", help="the interactive explorer (Streamlit) beside Dagster's UI; reads the warehouse")
    ui.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST}: this host only)")
    ui.add_argument("--port", type=int, default=DEFAULT_PORT)
    ui.set_defaults(func=lambda args: serve(args.host, args.port))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="themis", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="evaluate a model on tasks (default: the default model on every task)")
    run.add_argument("--model", default=DEFAULT_MODEL_ID)
    run.add_argument("--task", action="append", help="a task name (repeatable); default: every task")
    run.add_argument("--skip-reports", action="store_true", help="do not rebuild the leaderboard and reports")
    run.set_defaults(func=cmd_run)
    backfill = sub.add_parser("backfill", help="backfill a model across tasks through the Dagster daemon")
    backfill.add_argument("--model", required=True)
    backfill.add_argument("--task", action="append", help="a task name (repeatable); default: every task")
    backfill.add_argument("--wait", action="store_true", help="wait until the backfill finishes")
    backfill.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait with --wait")
    backfill.set_defaults(func=cmd_backfill)
    models = sub.add_parser("models", help="list, prepare or register the models of the registry")
    models.add_argument("action", choices=["list", "prepare", "register"])
    models.add_argument("ids", nargs="*")
    models.set_defaults(func=cmd_models)
    sql = sub.add_parser("sql", help="run read-only SQL (SELECT, DESCRIBE, SHOW, EXPLAIN) against the warehouse")
    sql.add_argument("query")
    sql.add_argument("--format", choices=["text", "csv"], default="text")
    sql.add_argument("--wait", type=float, default=DEFAULT_WAIT_S, help="seconds to retry while a run writes")
    sql.set_defaults(func=cmd_sql)
    importer = sub.add_parser("import", help="import replies produced elsewhere as a model's raw responses")
    importer.add_argument(
        "task",
        help="the task the replies answer: iat (the IAT framework's CSVs), bbq (BBQ's results format, "
        "scored as bbq_generate) or any generation/chat task (CSV/JSONL of request_id|item_id|prompt, reply)",
    )
    importer.add_argument("--model", required=True, help="model id (registered on the fly if new)")
    importer.add_argument("--column", help="bbq only: the prediction column, e.g. unifiedqa-t5-11b_pred_race")
    importer.add_argument("files", nargs="+", help="files of replies")
    importer.set_defaults(func=cmd_import)
    snap = sub.add_parser("snapshot", help="copy the warehouse for long read-only sessions (BI tools)")
    snap.add_argument("target", nargs="?", help="default: data/warehouse-snapshot.duckdb")
    snap.add_argument("--version", type=int, help="DuckLake only: copy this snapshot (default: the latest)")
    snap.set_defaults(func=cmd_snapshot)
    cache = sub.add_parser("cache", help="show or clear the request cache (answers reused across runs)")
    cache.add_argument("action", choices=["stats", "clear"])
    cache.add_argument("--model", help="only this model's cached answers")
    cache.set_defaults(func=cmd_cache)
    compare = sub.add_parser("compare", help="paired comparison of model A against baseline B (tests, Holm, gates)")
    compare.add_argument("model", help="the model under test")
    compare.add_argument("baseline", help="the model it is compared with")
    compare.add_argument("--task", action="append", help="a task name (repeatable); default: every task both have")
    compare.add_argument("--gate", action="store_true", help="exit 1 when a gate of data/gates.yaml finds a regression")
    compare.set_defaults(func=cmd_compare)
    board = sub.add_parser("leaderboard", help="print the leaderboard")
    board.set_defaults(func=cmd_leaderboard)
    add_ui_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from themis_dagster.runs.reachability import UnreachableError
    from themis_dagster.warehouse.ducklake import WarehouseConfigError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ConfigError, WarehouseConfigError, UnreachableError) as error:  # each names its setting
        print(f"themis: configuration error:\n{error}", file=sys.stderr)
        return 2


def console_main() -> None:
    """The ``themis`` command: ``main()``, then a quick exit after an in-process vLLM engine.

    With vLLM's engine in this process, the interpreter's own teardown (torch, oneDNN and
    vLLM's threads) takes about 2.5 s after every result is committed and every engine shut
    down; the command skips it (``os._exit``) once its output is flushed. ``main`` itself
    returns normally, so callers in Python (tests) keep a usable interpreter. For the same
    reason ``themis run`` leaves an in-process engine's teardown to the operating system.
    """
    global _QUICK_EXIT
    _QUICK_EXIT = True
    code = main()
    if "vllm" in sys.modules:
        import logging

        from themis_dagster.engines.vllm.tempfiles import remove_dist_stores

        remove_dist_stores()  # the skipped teardown would have deleted vLLM's /tmp/vllm_dist_* file
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    console_main()
