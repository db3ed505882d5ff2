"""The leaderboard's ranks and the table ``themis leaderboard`` prints."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tests.warehouse.read.synthetic import A, B
from themis_dagster.warehouse.read.ideals import metric_ideals
from themis_dagster.warehouse.read.leaderboard import Rank, printed_leaderboard, ranked_like_the_leaderboard, ranks
from themis_dagster.warehouse.read.metrics import headline


def test_ranks(conn: duckdb.DuckDBPyConnection) -> None:
    assert ranks(conn)[(A, "bbq", "s_dis")] == Rank(4, 4) and ranks(conn, B)[(B, "bbq", "s_dis")] == Rank(1, 4)
    assert (A, "crows_pairs_prompted", "pct_stereotype") not in ranks(conn)  # no ideal: not ranked
    computed = ranked_like_the_leaderboard(A, headline(conn), metric_ideals(conn))
    assert {key: rank for key, rank in computed.items() if key in ranks(conn)} == ranks(conn, A)
    assert computed[(A, "honest", "honest_ps")] == Rank(1, 1)  # declared, not on the leaderboard: ranked alike


def test_the_printed_table(conn: duckdb.DuckDBPyConnection, synthetic: Path, tmp_path: Path) -> None:
    printed = printed_leaderboard(conn)
    assert list(printed.columns[:9]) == ["task", "metric", "rank", "model", "value", "ci_low", "ci_high", "n", "ideal"]
    judged = printed[printed["judge"].notna()]
    assert list(judged["metric"]) == ["honest"] and list(judged["judge_note"]) == ["uncalibrated judge"]
    path = tmp_path / "stale.duckdb"
    path.write_bytes(synthetic.read_bytes())
    with duckdb.connect(str(path)) as stale:  # a row ranked before metrics without an ideal were left unranked
        stale.execute("INSERT INTO leaderboard VALUES ('t', 'm', 1, 'x', 0.2, 0.1, 0.3, 10, NULL, '2026-01-01')")
        stale.execute("DROP TABLE judged_metrics")
    with duckdb.connect(str(path), read_only=True) as stale:
        assert "t" not in set(printed_leaderboard(stale)["task"]) and ("x", "t", "m") not in ranks(stale)
        assert "judge" not in printed_leaderboard(stale).columns
