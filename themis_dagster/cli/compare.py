"""``themis compare``: paired comparison of model A against baseline B (tests, Holm, gates)."""

from __future__ import annotations

import argparse
import os
import sys

from themis_dagster.cli.common import warehouse_resource
from themis_dagster.registry.models import get_model, load_registry
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compare = subparsers.add_parser(
        "compare", help="paired comparison of model A against baseline B (tests, Holm, gates)"
    )
    compare.add_argument("model", help="the model under test")
    compare.add_argument("baseline", help="the model it is compared with")
    compare.add_argument("--task", action="append", help="a task name (repeatable); default: every task both have")
    compare.add_argument("--gate", action="store_true", help="exit 1 when a gate of data/gates.yaml finds a regression")
    compare.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare model A with baseline B on every task both have (or ``--task``): paired tests, Holm, gates.

    Exit codes: 0 compared (and, with ``--gate``, nothing regressed); 1 a gated regression
    with ``--gate``; 2 bad input (unknown model or task, incomparable evaluations, no items
    in common, a bad gate file), reported before anything is written.
    """
    from themis_dagster.comparisons.gates import load_gates
    from themis_dagster.comparisons.paired import ComparisonError
    from themis_dagster.comparisons.store import run_comparisons
    from themis_dagster.tasks.loader import load_overrides, load_task
    from themis_dagster.warehouse.read.comparisons import common_tasks

    settings = Settings.from_env()
    models = load_registry(settings.models_file, settings.discovered_models_file)
    for model_id in (args.model, args.baseline):
        get_model(models, model_id)
    gates = load_gates()
    overrides = load_overrides(settings.task_overrides_file)
    warehouse = warehouse_resource(settings)
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
