"""The leaderboard: every model's headline metrics with a declared ideal, ranked by distance from it.

Reads through the warehouse's read layer (``warehouse/read``); writes the ``leaderboard`` table.
"""

from datetime import UTC, datetime

import polars as pl
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue

from themis_dagster.assets.evaluation import bias_metrics
from themis_dagster.assets.factory import ROW_COUNT, AssetResult, report_asset
from themis_dagster.registry.mitigation import stage_of
from themis_dagster.reports.leaderboard_page import RegisteredModel, render_leaderboard, save_leaderboard
from themis_dagster.resources import ThemisConfig, WarehouseResource
from themis_dagster.tasks.loader import task_names
from themis_dagster.warehouse.partitions import replace_table
from themis_dagster.warehouse.read.metrics import headline_frame
from themis_dagster.warehouse.tables import declared


def metric_ideals(themis: ThemisConfig) -> pl.DataFrame:
    """(task, metric, ideal) for every headline metric the task files declare."""
    rows = []
    for name in task_names():
        for metric in themis.task(name).spec.metrics:
            if metric.headline:
                rows.append({"task": name, "metric": metric.name, "ideal": metric.ideal})
    return pl.DataFrame(rows, schema={"task": pl.String, "metric": pl.String, "ideal": pl.Float64})


def rank_models(headline: pl.DataFrame, ideals: pl.DataFrame, at: datetime) -> pl.DataFrame:
    """Rank 1 is the model closest to the metric's ideal (|value - ideal|); ties share a rank.

    A metric without a declared ideal is not ranked (there is nothing to be close to: never measured from 0).
    """
    joined = (
        headline.join(ideals, on=["task", "metric"], how="inner")
        .filter(pl.col("ideal").is_not_null())
        .with_columns((pl.col("value") - pl.col("ideal")).abs().alias("distance"))
    )
    ranked = joined.with_columns(
        pl.col("distance").rank(method="min").over(["task", "metric"]).cast(pl.Int32).alias("rank"),
        pl.lit(at).cast(pl.Datetime("us")).alias("materialized_at"),
    )
    return ranked.select(declared("leaderboard").column_names).sort(["task", "metric", "rank", "model"])


@report_asset(description="Headline metrics of every evaluated model, ranked per task and metric.", deps=[bias_metrics])
def leaderboard(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    with warehouse.connect() as conn:
        headline = headline_frame(conn)
    board = rank_models(headline, metric_ideals(themis), datetime.now(UTC).replace(tzinfo=None))
    with warehouse.connect() as conn:
        rows = replace_table(conn, "leaderboard", board)
    table = board.drop("materialized_at").to_pandas()
    return MaterializeResult(
        metadata={
            ROW_COUNT: rows,
            "models": board["model"].n_unique() if rows else 0,
            "leaderboard": MetadataValue.md(table.to_markdown(index=False, floatfmt=".4f") if rows else "(empty)"),
        }
    )


def registered_models(themis: ThemisConfig) -> list[RegisteredModel]:
    """Every model of the registry, with its parent and mitigation as the page shows them."""
    models = []
    for spec in themis.models().values():
        mitigation = None
        if spec.mitigation is not None:
            mitigation = f"{stage_of(spec.mitigation)}: {spec.mitigation.kind}"
        models.append(RegisteredModel(spec.id, spec.parent, mitigation))
    return models


@report_asset(
    description="The leaderboard as an HTML page: every registered model, headline metrics per benchmark family.",
    deps=[leaderboard],
    kinds=["html"],
)
def leaderboard_page(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    registered = registered_models(themis)
    with warehouse.connect() as conn:
        page = render_leaderboard(conn, registered)
    path = save_leaderboard(page, themis.reports_path())
    return MaterializeResult(
        metadata={
            "path": MetadataValue.path(str(path)),
            "models": len(page.models),
            "metric_columns": page.columns,
        }
    )
