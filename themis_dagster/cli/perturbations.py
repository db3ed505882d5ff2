"""``themis perturbations``: each perturbation's paired effect on a model's tasks (docs/counterfactuals.md)."""

from __future__ import annotations

import argparse
import os
import sys

import polars as pl

from themis_dagster.cli.common import warehouse_resource
from themis_dagster.registry.models import get_model, load_registry
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "perturbations", help="each perturbation's paired effect on a model's tasks (the metrics' tests, Holm)"
    )
    parser.add_argument("model", help="the evaluated model")
    parser.add_argument(
        "--task",
        action="append",
        help="a variant task (<task>__<perturbation>, repeatable); default: every one evaluated",
    )
    parser.set_defaults(func=cmd_perturbations)


def cmd_perturbations(args: argparse.Namespace) -> int:
    """Measure every evaluated variant of the model against its task, store the rows and print the view's.

    Exit codes: 0 measured; 2 bad input (an unknown model or task, a variant or its task without
    judgments), reported before anything is written.
    """
    from themis_dagster.comparisons.paired import ComparisonError
    from themis_dagster.comparisons.perturbation_store import effects_in_warehouse, store_effects
    from themis_dagster.perturbations import Mirror, build
    from themis_dagster.tasks.loader import load_overrides, load_task
    from themis_dagster.tasks.variants import split_variant
    from themis_dagster.warehouse.read.catalog import evaluated_tasks
    from themis_dagster.warehouse.read.comparisons import perturbation_effect_frame

    settings = Settings.from_env()
    get_model(load_registry(settings.models_file, settings.discovered_models_file), args.model)
    overrides = load_overrides(settings.task_overrides_file)
    mirror = Mirror(settings.datasets_dir, settings.cache_dir)
    with warehouse_resource(settings).connect() as conn:
        names = args.task or [task for task in evaluated_tasks(conn, args.model) if split_variant(task)[1] is not None]
        if not names:
            print(f"themis perturbations: {args.model} has no evaluated variant task", file=sys.stderr)
            return 2
        measured = []
        try:
            for name in names:
                variant = load_task(name, overrides.get(name))
                if variant.perturbation is None:
                    print(f"themis perturbations: {name} is not a variant (<task>__<perturbation>)", file=sys.stderr)
                    return 2
                perturbation = build(variant.perturbation, mirror, f"task {name}")
                original = load_task(variant.spec.task, overrides.get(variant.spec.task))
                rows = effects_in_warehouse(conn, original, args.model, name, perturbation.name)
                measured.append((name, original.name, perturbation.key, rows))
        except ComparisonError as error:
            print(f"themis perturbations: {error}", file=sys.stderr)
            return 2
        for name, task, key, rows in measured:
            store_effects(conn, args.model, name, task, key, rows, run_id=f"cli-{os.getpid()}")
        view = perturbation_effect_frame(conn, args.model).filter(pl.col("task").is_in(names))
    shown = view.to_pandas()
    print(shown.to_string(index=False) if not shown.empty else "(no declared metric to compare)")
    return 0
