"""Paired comparisons with Holm's p and the gates' verdicts, checkpoint trends and discordant items."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tests.warehouse.read.synthetic import NEW, OLD, A, B
from themis_dagster.warehouse.read.comparisons import (
    checkpoint_family,
    common_tasks,
    compared_baselines,
    comparison_rows,
    discordant,
    pair_frame,
    task_trend,
    trend_rows,
)


def test_comparisons_and_gates(conn: duckdb.DuckDBPyConnection) -> None:
    [row] = comparison_rows(conn, B, A) or []
    assert (row["metric"], row["difference"], row["p_adjusted"], row["regressed"]) == ("s_dis", -0.08, 0.01, False)
    assert comparison_rows(conn, B, order="metric") == [row] and comparison_rows(conn, A) == []
    assert compared_baselines(conn, B) == [A]
    assert pair_frame(conn, "comparisons", B, A)["metric"].to_list() == ["s_dis"]
    assert pair_frame(conn, "gate_verdicts", B, A, task="gb_direct").is_empty()


def test_trends_and_discordant_items(conn: duckdb.DuckDBPyConnection) -> None:
    assert checkpoint_family(conn, NEW) == "fam" and checkpoint_family(conn, A) == ""
    trend = trend_rows(conn, "fam")
    assert [(r["model"], r["step"]) for r in trend] == [(OLD, 100), (NEW, 200)]
    assert trend[1]["p_adjusted_vs_previous"] == 0.01
    assert task_trend(conn, NEW, "bbq")["model"].to_list() == [OLD, NEW]
    assert common_tasks(conn, A, B) == ["bbq"]
    total, pairs = discordant(conn, B, A, "bbq")
    assert total == 3 and list(pairs["item_id"]) == ["i1", "i3", "i4"]  # i2: both "unknown"
    assert pairs["baseline_reply"].iloc[0] == "A) the old man"


def test_without_the_comparison_views(synthetic: Path, tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    path.write_bytes(synthetic.read_bytes())
    with duckdb.connect(str(path)) as conn:
        for view in ("checkpoint_trends", "gate_verdicts", "comparisons"):
            conn.execute(f"DROP VIEW {view}")
    with duckdb.connect(str(path), read_only=True) as conn:
        assert comparison_rows(conn, B) is None and checkpoint_family(conn, NEW) is None
