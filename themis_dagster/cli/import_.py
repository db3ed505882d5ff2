"""``themis import``: load replies produced elsewhere as a model's raw responses, then score them.

(The module is ``import_`` because ``import`` is a keyword.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from themis_dagster.cli.common import QUIET_LOGS, ensure_dagster_home, warehouse_resource
from themis_dagster.errors import ConfigError
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from themis_dagster.importers import family_importers

    importers = family_importers()
    formats = ", ".join(f"{name} ({spec.help})" for name, spec in importers.items())
    importer = subparsers.add_parser("import", help="import replies produced elsewhere as a model's raw responses")
    importer.add_argument(
        "task",
        help=f"the task the replies answer: {formats} "
        "or any generation/chat task (CSV/JSONL of request_id|item_id|prompt, reply)",
    )
    importer.add_argument("--model", required=True, help="model id (registered on the fly if new)")
    takers = " or ".join(name for name, spec in importers.items() if spec.column)
    importer.add_argument("--column", help=f"{takers} only: the prediction column, e.g. unifiedqa-t5-11b_pred_race")
    importer.add_argument("files", nargs="+", help="files of replies")
    importer.set_defaults(func=cmd_import)


def _imported(args: argparse.Namespace, settings: Settings) -> tuple[str, object, str, str]:
    """(stored task, replies, dataset sha256, finish_reason) for ``themis import``; raises ImportValidationError."""
    from dataclasses import replace

    from themis_dagster.assets.families import dataset_inputs
    from themis_dagster.importers import ImportRequest, ImportValidationError, family_importers, run_importer
    from themis_dagster.importers.replies import import_task_replies
    from themis_dagster.resources import ThemisConfig

    paths = [Path(p) for p in args.files]
    importers = family_importers()
    found = importers.get(args.task)
    if args.column is not None and (found is None or not found.column):
        takers = " or ".join(f"'themis import {name}'" for name, spec in importers.items() if spec.column)
        raise ImportValidationError([f"--column: only for {takers} (task {args.task!r})"])
    themis = ThemisConfig(
        models_file=str(settings.models_file),
        datasets_dir=str(settings.datasets_dir),
        cache_dir=str(settings.cache_dir),
        models_dir=str(settings.models_dir),
        task_overrides_file=str(settings.task_overrides_file or ""),
    )
    if found is not None:  # a benchmark's own format (its family's importer)
        done = run_importer(found, ImportRequest(paths, args.column, settings, themis.task))
        return done.task, done.replies, done.dataset_sha256, done.finish_reason
    task = themis.task(args.task)
    if upstream := dataset_inputs(warehouse_resource(settings), task):  # as task_dataset hands them (LangBiTe's)
        task = task.with_inputs(replace(task.inputs, upstream=upstream))
    resolved = themis.dataset_files(task)
    imported = import_task_replies(task, {name: f.path for name, f in resolved.items()}, paths)
    return args.task, imported, "+".join(f.sha256 for f in resolved.values()), "imported"


def cmd_import(args: argparse.Namespace) -> int:
    """Load replies produced elsewhere as a model's raw responses, then score them like our own."""
    from dagster import AssetKey, AssetSelection, DagsterInstance

    from themis_dagster.definitions import build_definitions
    from themis_dagster.importers import ImportedReplies, ImportValidationError, family_importers
    from themis_dagster.importers.store import ensure_model_registered, record_import, store_imported
    from themis_dagster.partitions import evaluation_key, register_models
    from themis_dagster.registry.model_id import InvalidModelIdError, validate_model_id
    from themis_dagster.tasks.loader import task_names

    settings = Settings.from_env()
    try:
        validate_model_id(args.model)
    except InvalidModelIdError as error:
        print(f"themis import: {error}", file=sys.stderr)
        return 2
    importers = family_importers()
    if args.task not in importers and args.task not in task_names():
        print(f"themis import: unknown task {args.task!r} ({', '.join(importers)} or a task name)", file=sys.stderr)
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
    warehouse = warehouse_resource(settings)
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
