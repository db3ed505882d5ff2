"""A variant partition against its task: the paired effect of its perturbation on every headline metric.

Partitioned by model x task like the evaluation chain and in the ``comparisons`` group, so the
``evaluate`` run of a variant (``bbq_generate__gender_swap``) measures its effect in the same
run, as soon as its original partition has judgments (``themis run`` evaluates a variant right after
its task; a variant evaluated before its task records that there is nothing to compare yet, and
``themis perturbations`` measures it later). A task's own partition has no perturbation: nothing to
measure. Holm's adjustment spans the model's whole battery (the ``perturbation_effects`` view),
docs/counterfactuals.md.
"""

import polars as pl
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue

from themis_dagster.assets.evaluation import bias_metrics
from themis_dagster.assets.factory import ROW_COUNT, AssetResult, comparison_asset
from themis_dagster.comparisons.perturbation_store import effects_in_warehouse, store_effects
from themis_dagster.evaluation.variants import variant_perturbation
from themis_dagster.partitions import model_and_task
from themis_dagster.resources import ThemisConfig, WarehouseResource
from themis_dagster.warehouse.read.catalog import evaluated_tasks
from themis_dagster.warehouse.read.comparisons import perturbation_effect_frame


@comparison_asset(
    deps=[bias_metrics],
    description="A variant partition against its original task: each headline metric's paired effect, Holm.",
)
def perturbation_effects(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource
) -> AssetResult:
    key = model_and_task(context)
    task = themis.task(key.task)
    perturbation = variant_perturbation(task)
    if perturbation is None:
        return MaterializeResult(metadata={ROW_COUNT: 0, "perturbation": "(none: not a variant)"})
    original = themis.task(task.spec.task)
    with warehouse.connect() as conn:
        if original.name not in evaluated_tasks(conn, key.model):
            return MaterializeResult(
                metadata={
                    ROW_COUNT: 0,
                    "perturbation": perturbation.name,
                    "original": f"{key.model} is not evaluated on {original.name} yet: nothing to compare",
                }
            )
        rows = effects_in_warehouse(conn, original, key.model, key.task, perturbation.name)
        stored = store_effects(conn, key.model, key.task, original.name, perturbation.key, rows, run_id=context.run_id)
        view = perturbation_effect_frame(conn, key.model, key.task)
    headline = view.filter(pl.col("subset").is_null()).select(
        "scope", "metric", "value", "original_value", "difference", "ci_low", "ci_high", "p_value", "p_adjusted",
        "n_pairs", "test",
    )  # fmt: skip
    first = view.row(0, named=True) if view.height else {}
    return MaterializeResult(
        metadata={
            ROW_COUNT: stored,
            "perturbation": perturbation.name,
            "perturbation_key": perturbation.key,
            "list_sha256": perturbation.list_sha256,
            "items_changed": int(first.get("n_changed", 0)),
            "items_unchanged": int(first.get("n_unchanged", 0)),
            "headline": MetadataValue.md(_markdown(headline)),
        }
    )


def _markdown(frame: pl.DataFrame) -> str:
    """A small table as markdown, numbers to four significant digits."""
    if frame.is_empty():
        return "(none)"

    def cell(value: object) -> str:
        return f"{value:.4g}" if isinstance(value, float) else "" if value is None else str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * frame.width]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)
