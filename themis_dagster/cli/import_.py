"""``themis import``: load replies produced elsewhere as a model's raw responses, then score them.

(The module is ``import_`` because ``import`` is a keyword.)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

from themis_dagster.cli.common import QUIET_LOGS, ensure_dagster_home, warehouse_resource
from themis_dagster.errors import ConfigError
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    importer = subparsers.add_parser("import", help="import replies produced elsewhere as a model's raw responses")
    importer.add_argument(
        "task",
        help="the task the replies answer: iat (the IAT framework's CSVs), bbq (BBQ's results format, "
        "scored as bbq_generate) or any generation/chat task (CSV/JSONL of request_id|item_id|prompt, reply)",
    )
    importer.add_argument("--model", required=True, help="model id (registered on the fly if new)")
    importer.add_argument("--column", help="bbq only: the prediction column, e.g. unifiedqa-t5-11b_pred_race")
    importer.add_argument("files", nargs="+", help="files of replies")
    importer.set_defaults(func=cmd_import)


def _imported(args: argparse.Namespace, settings: Settings) -> tuple[str, object, str, str]:
    """(stored task, replies, dataset sha256, finish_reason) for ``themis import``; raises ImportValidationError."""
    from dataclasses import replace

    from themis_dagster.assets.langbite_augmentation import augmentation_inputs
    from themis_dagster.datasets import resolve_file
    from themis_dagster.importers import ImportValidationError
    from themis_dagster.importers.bbq import import_predictions
    from themis_dagster.importers.iat import import_replies
    from themis_dagster.importers.replies import import_task_replies
    from themis_dagster.resources import ThemisConfig
    from themis_dagster.tasks.bbq.generate_utils import R_IMPORT

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
    if upstream := augmentation_inputs(warehouse_resource(settings), task):  # as task_dataset hands them (LangBiTe's)
        task = task.with_inputs(replace(task.inputs, upstream=upstream))
    resolved = themis.dataset_files(task)
    imported = import_task_replies(task, {name: f.path for name, f in resolved.items()}, paths)
    return args.task, imported, "+".join(f.sha256 for f in resolved.values()), "imported"


def cmd_import(args: argparse.Namespace) -> int:
    """Load replies produced elsewhere as a model's raw responses, then score them like our own."""
    from dagster import AssetKey, AssetSelection, DagsterInstance

    from themis_dagster.definitions import build_definitions
    from themis_dagster.importers import ImportedReplies, ImportValidationError
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
