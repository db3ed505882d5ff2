"""A judged metric is shown where its number is: its judge, the judge's kappa and its corrected value, in the
report and the explorer; a judge without a calibration says "uncalibrated judge"."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from themis_dagster.reports import render_model_report
from themis_dagster.reports.data import load_report_data
from themis_dagster.warehouse.schema import ensure_schema

T0 = datetime(2026, 11, 26, 12, 0, 0)
MODEL, JUDGE = "m-1", "judge-1"
CHANCE = "the judge is no better than chance at 'positive': it answers 'positive' for 0.500 of true 'neutral' rows"


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        for subset, metric, value in [
            (None, "negative_disparity", 0.3), (None, "negative_regard_share", 0.4), (None, "toxicity_rate", 0.1),
            (None, "positive_regard_share", 0.2), ("gender:A", "negative_regard_share", 0.5),
        ]:  # fmt: skip
            for table in ("metric_values", "metric_history"):
                conn.execute(
                    f"INSERT INTO {table} (model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, "
                    "run_id) VALUES (?, 'bold', ?, ?, ?, ?, ?, 10, ?, 'r1')",
                    [MODEL, subset, metric, value, value - 0.1, value + 0.1, T0],
                )
        calibrated = ("regard", 0.12, 0.05, 0.19)
        for subset, metric, calibration, corrected, note in [
            (None, "negative_regard_share", calibrated, (0.25, 0.1, 0.4), None),
            ("gender:A", "negative_regard_share", calibrated, (0.35, 0.2, 0.5), None),
            (None, "positive_regard_share", calibrated, (None, None, None), CHANCE),
            (None, "toxicity_rate", (None, None, None, None), (None, None, None), "uncalibrated judge"),
        ]:
            conn.execute(
                "INSERT INTO judged_metrics VALUES (?, 'bold', ?, ?, ?, ?, ?, ?, ?, 0.4, ?, ?, ?, 301, ?, 'r1', ?)",
                [MODEL, subset, metric, JUDGE, *calibration, *corrected, note, T0],
            )
    return path


def test_report_shows_judge_kappa_and_corrected_value_beside_the_judged_metric(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        html = render_model_report(conn, MODEL).html
    assert f"judge {JUDGE} · kappa 0.120 (0.050 – 0.190) on regard, 301 readable answers" in html
    assert "corrected 0.250 (0.100 – 0.400)" in html
    assert "corrected 0.350 (0.200 – 0.500)" in html  # a subset's corrected value, in its table
    assert f"judge {JUDGE} · uncalibrated judge" in html and "no corrected value: uncalibrated judge" in html
    assert "no corrected value: the judge is no better than chance at &#39;positive&#39;" in html
    # a metric no judge counted gets no judge line
    assert html.count(f"judge {JUDGE}") == 4


def test_explorer_model_page_tables_carry_judge_and_corrected_columns(warehouse: Path) -> None:
    from themis_dagster.explorer.model import subset_table, summary_tables

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        report = load_report_data(conn, MODEL)
    [(_, _, frame, judges)] = summary_tables(report)
    shown = {row["metric"]: (row["judge"], row["corrected"]) for row in judges.to_dict("records")}
    assert shown["negative_regard_share"] == (
        f"judge {JUDGE} · kappa 0.120 (0.050 – 0.190) on regard, 301 readable answers",
        "corrected 0.250 (0.100 – 0.400)",
    )
    assert shown["toxicity_rate"] == (f"judge {JUDGE} · uncalibrated judge", "no corrected value: uncalibrated judge")
    assert "negative_disparity" in set(frame["metric"]) and "negative_disparity" not in shown  # no judge counted it
    subsets = subset_table(report, "bold").to_dict("records")
    assert subsets[0]["corrected"] == "corrected 0.350 (0.200 – 0.500)"


def test_an_older_warehouse_without_judged_metrics_still_reports(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        conn.execute("DROP TABLE judged_metrics")
        conn.execute(
            "INSERT INTO metric_values (model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, "
            "run_id) VALUES (?, 'bold', NULL, 'negative_regard_share', 0.4, 0.3, 0.5, 10, ?, 'r1')",
            [MODEL, T0],
        )
    with duckdb.connect(str(path), read_only=True) as conn:
        assert load_report_data(conn, MODEL).judged == {}


def test_leaderboard_shows_the_corrected_value_beside_the_judged_one(warehouse: Path) -> None:
    from themis_dagster.reports.leaderboard_page import RegisteredModel, render_leaderboard

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        html = render_leaderboard(conn, [RegisteredModel(MODEL)]).html
    assert '<div class="corrected">corrected 0.250 (0.100 – 0.400)</div>' in html
    assert '<div class="corrected">no corrected value: uncalibrated judge</div>' in html
    assert f"judge {JUDGE} · kappa 0.120 (0.050 – 0.190) on regard" in html  # in the cell's title
    assert "corrected 0.350" not in html  # subsets are not on the leaderboard
    assert html.count('class="corrected"') == 3  # the three judged headline values, not negative_disparity
