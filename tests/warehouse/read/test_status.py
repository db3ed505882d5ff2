"""Whether a warehouse can be read, and an older one named with what to run: by the layer, the explorer and the CLI."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from themis_dagster.cli import main
from themis_dagster.explorer import APP
from themis_dagster.warehouse.read.status import declared_views, read_only, schema_gaps, warehouse_status
from themis_dagster.warehouse.schema import ensure_schema

VIEWS = ["partition_status", "metrics", "headline_metrics", "leaderboard_view", "parse_failures", "refusals",
         "judgment_drilldown", "metric_drilldown", "metric_trend", "parse_rates", "model_precision",
         "reading_disagreements", "comparisons", "gate_verdicts", "checkpoint_trends",
         "perturbation_effects"]  # fmt: skip


@pytest.fixture
def older(synthetic: Path, tmp_path: Path) -> Path:
    """The synthetic warehouse as an older version left it: no refusals view, no judged_metrics, no reasoning column."""
    path = tmp_path / "older.duckdb"
    path.write_bytes(synthetic.read_bytes())
    with duckdb.connect(str(path)) as conn:
        conn.execute("DROP VIEW refusals")
        conn.execute("DROP TABLE judged_metrics")
        conn.execute("DROP VIEW parse_failures")
        conn.execute("ALTER TABLE responses DROP COLUMN reasoning")
    return path


def test_the_current_schema_has_no_gaps_and_every_view(conn: duckdb.DuckDBPyConnection) -> None:
    assert declared_views() == VIEWS
    assert schema_gaps(conn) == []


def test_status_of_missing_empty_older_and_ready_warehouses(synthetic: Path, older: Path, tmp_path: Path) -> None:
    assert warehouse_status(tmp_path / "nowhere.duckdb").title.startswith("No warehouse at")
    bare, empty = tmp_path / "bare.duckdb", tmp_path / "empty.duckdb"
    duckdb.connect(str(bare)).close()
    with duckdb.connect(str(empty)) as conn:
        ensure_schema(conn)
    for path in (bare, empty):
        assert "holds no results" in warehouse_status(path).title
    assert warehouse_status(synthetic).ready
    status = warehouse_status(older)
    assert not status.ready and status.title == f"The warehouse {older} is from an older schema"
    assert status.detail.startswith(
        "It lacks column responses.reasoning, table judged_metrics, view parse_failures, view refusals. Update it"
    )
    assert f"python -m themis_dagster.warehouse.migrate {older}" in status.detail
    with read_only(older) as conn:
        assert schema_gaps(conn) == ["column responses.reasoning", "table judged_metrics", "view parse_failures",
                                     "view refusals"]  # fmt: skip


def test_the_cli_and_the_explorer_name_what_to_run_never_a_traceback(
    older: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(older))
    with duckdb.connect(str(older)) as conn:
        conn.execute("DROP TABLE leaderboard CASCADE")
    assert main(["leaderboard"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("themis leaderboard: This warehouse is from an older schema: it has no table or view")
    assert f"python -m themis_dagster.warehouse.migrate {older}" in said and "Traceback" not in said
    for page in (None, "model.py", "drilldown.py", "compare.py"):
        at = AppTest.from_file(str(APP), default_timeout=60).run()
        if page is not None:
            at.switch_page(page)
            at.run()
        assert not at.exception, page
        assert at.warning[0].value == f"The warehouse {older} is from an older schema", page
        assert any("themis_dagster.warehouse.migrate" in str(m.value) for m in at.markdown), page
