"""Each model against its parent, per task, with a blocking regression gate; and any pair on request.

``comparisons`` is partitioned by model x task like the evaluation chain, so the run that
evaluates a new checkpoint on a task (the checkpoint sensor's ``evaluate`` run) also
compares it with its parent on that task and carries the gate's verdict: the blocking
check fails the run on a regression, and the run gets the tag ``themis/gate``
(``passed`` | ``regressed`` | ``no_parent`` | ``parent_not_evaluated``). An unpartitioned
asset over all models would instead recompute every pair whenever any partition changed.
Holm's adjustment spans the pair's whole battery (the ``comparisons`` view), so a verdict
reads the p-values of the tasks compared so far.

``compare_models`` is the same comparison for any two models, launched from the UI with
their ids (and ``themis compare A B`` from the command line).
"""

from typing import Any

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    Config,
    Failure,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    job,
    op,
)
from pydantic import Field

from themis_dagster.assets.evaluation import bias_metrics
from themis_dagster.assets.factory import ROW_COUNT, AssetResult, comparison_asset
from themis_dagster.assets.metadata import preview
from themis_dagster.comparisons.gates import load_gates
from themis_dagster.comparisons.store import clear_parent_comparisons, judgments_of, run_comparisons
from themis_dagster.partitions import model_and_task
from themis_dagster.resources import ThemisConfig, WarehouseResource
from themis_dagster.warehouse.read.comparisons import common_tasks, task_trend

GATE_CHECK = "no_regression_vs_parent"
GATE_TAG = "themis/gate"


def _tag_run(context: AssetExecutionContext | OpExecutionContext, verdict: str) -> None:
    """Put the gate's verdict on the run, where the runs list and the sensor's run history show it."""
    context.instance.add_run_tags(context.run_id, {GATE_TAG: verdict})


def _trend(conn: Any, model: str, task: str) -> MetadataValue:
    """The model's checkpoint family on this task: headline metrics by step, significant changes marked."""
    frame = task_trend(conn, model, task)
    if frame.is_empty():
        return MetadataValue.md("(not a checkpoint family of two or more evaluated steps)")
    marked = frame.with_columns(pl.when(pl.col("significant")).then(pl.lit("*")).otherwise(pl.lit("")).alias("mark"))
    return preview(marked, rows=200)


@comparison_asset(
    deps=[bias_metrics],
    description="The model against its registered parent on this task: paired differences, CIs, tests, Holm.",
    check_specs=[
        AssetCheckSpec(
            name=GATE_CHECK,
            asset="comparisons",
            blocking=True,
            description="Fails when the model regresses against its parent beyond a gate of data/gates.yaml.",
        )
    ],
)
def comparisons(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    key = model_and_task(context)
    parent = themis.model(key.model).parent  # the registry (parents included) is validated here
    task = themis.task(key.task)
    gates = load_gates()  # a bad gate file fails before any work
    if parent is None:
        with warehouse.connect() as conn:
            clear_parent_comparisons(conn, key.model, key.task, None)
        _tag_run(context, "no_parent")
        return MaterializeResult(
            check_results=[AssetCheckResult(check_name=GATE_CHECK, passed=True, description="no parent registered")],
            metadata={ROW_COUNT: 0, "parent": "(none)"},
        )
    with warehouse.connect() as conn:
        if not judgments_of(conn, parent, key.task):
            _tag_run(context, "parent_not_evaluated")
            return MaterializeResult(
                check_results=[
                    AssetCheckResult(
                        check_name=GATE_CHECK,
                        passed=False,
                        severity=AssetCheckSeverity.WARN,
                        description=f"parent {parent} has no judgments on {key.task}: nothing to gate",
                    )
                ],
                metadata={ROW_COUNT: 0, "parent": parent},
            )
        view, verdicts, notes = run_comparisons(
            conn, [task], key.model, parent, gates, origin="parent", run_id=context.run_id
        )
        clear_parent_comparisons(conn, key.model, key.task, parent)
        trend = _trend(conn, key.model, key.task)
    regressed = verdicts.filter(pl.col("regressed"))
    _tag_run(context, "regressed" if regressed.height else "passed")
    headline = view.filter(pl.col("subset").is_null())
    return MaterializeResult(
        check_results=[
            AssetCheckResult(
                check_name=GATE_CHECK,
                passed=regressed.is_empty(),
                description=(
                    f"regressed against {parent} on " + ", ".join(regressed["metric"].to_list())
                    if regressed.height
                    else f"no gated metric regressed against {parent} ({verdicts.height} gated)"
                ),
                metadata={"verdicts": preview(verdicts, rows=50)},
            )
        ],
        metadata={
            ROW_COUNT: view.height,
            "parent": parent,
            "headline": preview(
                headline.select(
                    "metric",
                    "value",
                    "baseline_value",
                    "difference",
                    "ci_low",
                    "ci_high",
                    "p_value",
                    "p_adjusted",
                    "n_pairs",
                    "test",
                ),
                rows=50,
            ),
            "checkpoint_trend": trend,
            "notes": "; ".join(notes) or "(none)",
        },
    )


class CompareConfig(Config):
    """Which two models to compare (the UI's launchpad asks for these)."""

    model: str = Field(description="The model under test.")
    baseline: str = Field(description="The model it is compared with (e.g. its parent).")
    tasks: list[str] = Field(default_factory=list, description="Tasks to compare; empty: every task both have.")
    gate: bool = Field(default=False, description="Fail the run when a gate of data/gates.yaml finds a regression.")


@op(required_resource_keys={"themis", "warehouse"})
def compare_pair(context: OpExecutionContext, config: CompareConfig) -> None:
    """Compare the two models on the chosen tasks and store the rows (origin ``requested``)."""
    themis: ThemisConfig = context.resources.themis
    warehouse: WarehouseResource = context.resources.warehouse
    for model_id in (config.model, config.baseline):
        themis.model(model_id)
    gates = load_gates()
    with warehouse.connect() as conn:
        names = config.tasks or common_tasks(conn, config.model, config.baseline)
        if not names:
            raise Failure(f"{config.model} and {config.baseline} have no task in common to compare")
        tasks = [themis.task(name) for name in names]
        view, verdicts, notes = run_comparisons(
            conn, tasks, config.model, config.baseline, gates, origin="requested", run_id=context.run_id
        )
    regressed = verdicts.filter(pl.col("regressed"))
    _tag_run(context, "regressed" if regressed.height else "passed")
    context.log.info(f"{view.height} comparisons; {regressed.height} gated regressions; {'; '.join(notes)}")
    if config.gate and regressed.height:
        raise Failure(
            f"{config.model} regressed against {config.baseline}: "
            + ", ".join(f"{r['task']}.{r['metric']}" for r in regressed.iter_rows(named=True)),
            metadata={"verdicts": preview(verdicts, rows=50)},
        )


@job(description="Compare two registered models on the tasks both were evaluated on (paired tests, Holm, gates).")
def compare_models() -> None:
    compare_pair()
