"""A metric's ideal, defined once: declared (runs, then the leaderboard, then given), else none, and never 0.

A metric without a declared ideal says "no ideal declared" in the report, the explorer and the
leaderboard page, is not ranked by the leaderboard asset and has no distance in ``leaderboard_view``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl

from tests.warehouse.read.synthetic import A, B
from themis_dagster.assets.leaderboard import rank_models
from themis_dagster.explorer import data
from themis_dagster.reports.data import load_report_data
from themis_dagster.reports.summary import summary_row
from themis_dagster.warehouse.read.ideals import NO_IDEAL, Ideals, metric_ideals
from themis_dagster.warehouse.schema import ensure_schema


def test_declared_ideals_and_directions(conn: duckdb.DuckDBPyConnection) -> None:
    ideals = metric_ideals(conn)
    assert ideals.ideal("bbq", "s_dis") == 0.0 and ideals.ideal("bbq", "unparsed_rate") == 0.0  # declared, not headline
    assert ideals.ideal("honest", "honest_ps") == 0.0 and ideals.ideal("gb_direct", "fail_rate_mark") == 1.0
    assert ideals.ideal("crows_pairs_prompted", "pct_stereotype") is None
    assert ideals.higher_is_better[("bbq", "accuracy_ambig")] is True
    assert ("bbq", "s_dis") not in ideals.higher_is_better
    assert ideals.distance("bbq", "s_dis", 0.1) == 0.1
    assert ideals.distance("crows_pairs_prompted", "pct_stereotype", 0.6) is None
    given = metric_ideals(conn, {("crows_pairs_prompted", "pct_stereotype"): 0.5})
    assert given.ideal("crows_pairs_prompted", "pct_stereotype") == 0.5
    assert Ideals().ideal("t", "m") is None


def test_a_missing_ideal_is_never_zero(conn: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    board = data.leaderboard(conn)
    row = board[(board["model"] == A) & (board["metric"] == "pct_stereotype")].iloc[0]
    assert pd.isna(row["ideal"]) and pd.isna(row["distance"]) and pd.isna(row["rank"]) and row["verdict"] == NO_IDEAL
    report = load_report_data(conn, A)
    assert ("crows_pairs_prompted", "pct_stereotype") not in report.ranks
    shown = summary_row(next(r for r in report.headline if r.metric == "pct_stereotype"), None)
    assert (shown["ideal"], shown["verdict"]) == ("—", NO_IDEAL)
    # the leaderboard asset ranks only metrics with a declared ideal
    headline = pl.DataFrame({"model": [A, B], "task": ["t", "t"], "metric": ["m", "m"], "value": [0.2, -0.1],
                             "ci_low": [0.1, -0.2], "ci_high": [0.3, 0.0], "n": [10, 10]})  # fmt: skip
    ideals = pl.DataFrame({"task": ["t"], "metric": ["m"], "ideal": [None]}, schema={"task": pl.String,
                          "metric": pl.String, "ideal": pl.Float64})  # fmt: skip
    assert rank_models(headline, ideals, datetime(2026, 1, 1)).is_empty()
    # a row an older leaderboard stored without an ideal has no distance and no verdict in the view
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as stale:
        ensure_schema(stale)
        stale.execute("INSERT INTO leaderboard VALUES ('t', 'm', 1, 'x', 0.2, 0.1, 0.3, 10, NULL, '2026-01-01')")
        assert stale.execute("SELECT distance_from_ideal, ci_contains_ideal FROM leaderboard_view").fetchall() == [
            (None, None)
        ]
