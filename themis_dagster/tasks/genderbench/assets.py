"""GenderBench's own assets (its family's ``assets``): the section marks and the multi-model HTML report.

- ``genderbench_marks``: GenderBench's marks aggregated per model and use case, stored
  as metrics of the pseudo-task ``genderbench``.
- ``genderbench_report``: GenderBench's report over every model in the warehouse, rebuilt after
  its section marks (``report.py``).
"""

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from dagster import AssetDep, AssetExecutionContext, MaterializeResult, MetadataValue

from themis_dagster.assets.factory import AssetResult, report_asset
from themis_dagster.resources import ThemisConfig, WarehouseResource
from themis_dagster.tasks.genderbench.marks import aggregate_use_cases
from themis_dagster.tasks.genderbench.report import build_report, render_report
from themis_dagster.tasks.spec import MetricValue
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import to_frame
from themis_dagster.warehouse.partitions import replace_partition

GENDERBENCH_TASK = "genderbench"
GENDERBENCH_PROBES = "task LIKE 'gb\\_%' ESCAPE '\\'"
"""The SQL condition that keeps the rows of GenderBench's probes (tasks ``gb_*``)."""
REPORT_FILE = "genderbench_report.html"


def genderbench_metrics(
    warehouse: WarehouseResource, columns: str, where: str, params: Sequence[object] = ()
) -> pl.DataFrame:
    """``columns`` of the metrics rows ``where`` keeps: what the GenderBench marks and report read."""
    with warehouse.connect() as conn:
        return conn.execute(f"SELECT {columns} FROM metrics WHERE {where}", list(params)).pl()  # noqa: S608 - our SQL


@report_asset(
    description="GenderBench section marks (1=A .. 4=D) per model and use case, as metrics of task 'genderbench'.",
    deps=[AssetDep("bias_metrics")],
)
def genderbench_marks(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource
) -> AssetResult:
    marks = genderbench_metrics(
        warehouse,
        "model, task, metric, value",
        f"{GENDERBENCH_PROBES} AND subset IS NULL AND metric LIKE '%\\_mark' ESCAPE '\\'",
    )
    now = datetime.now(UTC).replace(tzinfo=None)
    summary: dict[str, dict[str, float | None]] = {}
    with warehouse.connect() as conn:
        for model in sorted(set(marks["model"].to_list())):
            rows = aggregate_use_cases(marks.filter(pl.col("model") == model).to_dicts())
            values = [MetricValue(r["subset"], r["metric"], r["value"], None, None, int(r["n"])) for r in rows]
            frame = to_frame(
                "metric_values", values, model=model, task=GENDERBENCH_TASK, materialized_at=now, run_id=context.run_id
            )
            replace_partition(conn, "metric_values", frame, model, GENDERBENCH_TASK)
            append_rows(conn, "metric_history", frame)
            sections = {str(v.subset).removeprefix("use_case="): v.value for v in values if v.metric == "mark"}
            summary[model] = sections
    return MaterializeResult(metadata={"models": len(summary), "mean_mark_by_model": MetadataValue.json(summary)})


@report_asset(
    description="GenderBench's report over every model: global A-D table, a chart per metric, masculine vs feminine.",
    deps=[genderbench_marks],
    kinds=["html"],
)
def genderbench_report(themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    frame = genderbench_metrics(
        warehouse,
        "model, task, subset, metric, value, ci_low, ci_high",
        f"task = ? OR {GENDERBENCH_PROBES}",
        [GENDERBENCH_TASK],
    )
    content = build_report(frame.to_dicts())
    html = render_report(content, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    target = Path(themis.reports_dir) / REPORT_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".html.partial")
    partial.write_text(html, encoding="utf-8")
    partial.replace(target)  # readers see the old report or the new one, never half of one
    return MaterializeResult(metadata={"path": MetadataValue.path(str(target)), "models": len(content["models"])})


ASSETS = [genderbench_marks, genderbench_report]
"""The family's assets, both reports (rebuilt with the others after new metrics)."""
