"""Per-model HTML reports, rebuilt whenever the leaderboard changes."""

import os

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue

from themis_dagster.assets.factory import AssetResult, report_asset
from themis_dagster.assets.leaderboard import leaderboard
from themis_dagster.reports import known_models, render_model_report, save_model_report
from themis_dagster.resources import ThemisConfig, WarehouseResource

DEFAULT_EXPLORER_URL = "http://127.0.0.1:8501"  # `themis ui` / `make ui`; THEMIS_UI_URL where it runs elsewhere


@report_asset(
    description="One HTML report per model (bias per task with CIs, models side by side, checkpoints over time).",
    deps=[leaderboard],
    kinds=["html"],
)
def model_reports(context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource) -> AssetResult:
    with warehouse.connect() as conn:
        explorer = os.environ.get("THEMIS_UI_URL") or DEFAULT_EXPLORER_URL
        reports = [render_model_report(conn, model, explorer_url=explorer) for model in known_models(conn)]
    paths = {report.model: str(save_model_report(report, themis.reports_path())) for report in reports}
    return MaterializeResult(
        metadata={
            "reports": len(paths),
            "files": MetadataValue.json(paths),
            "summary": MetadataValue.md("\n\n".join(report.markdown for report in reports) or "(no models yet)"),
        }
    )
