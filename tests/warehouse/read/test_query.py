"""Reads bind their values, read a bare database as empty and name an older schema instead of failing."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from themis_dagster.warehouse.read.query import OlderSchemaError, frame, number, rows, scalar, table
from themis_dagster.warehouse.schema import ensure_schema


def test_values_are_bound_never_spliced(conn: duckdb.DuckDBPyConnection) -> None:
    hostile = "m-a' OR '1'='1"
    assert rows(conn, "SELECT model FROM metrics WHERE model = ?", [hostile]) == []
    counted = scalar(conn, "SELECT count(*) FROM metrics WHERE model = $m", {"m": "m-a"})
    assert counted == 12  # 10 headline values, 2 subsets
    assert frame(conn, "SELECT DISTINCT model FROM metrics ORDER BY 1")["model"].to_list() == [
        "fam-step-100", "fam-step-200", "m-a", "m-b"
    ]  # fmt: skip
    assert list(table(conn, "SELECT 1 AS one").columns) == ["one"]


def test_an_older_warehouse_is_named_with_what_to_run(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        conn.execute("DROP VIEW metric_drilldown")
        conn.execute("DROP VIEW metrics CASCADE")
        conn.execute("ALTER TABLE judgments DROP COLUMN refused")
    with duckdb.connect(str(path), read_only=True) as conn:
        with pytest.raises(OlderSchemaError, match=r"no table or view metrics.*themis_dagster\.warehouse\.migrate"):
            rows(conn, "SELECT * FROM metrics")
        with pytest.raises(OlderSchemaError, match="no column refused"):
            scalar(conn, "SELECT count(*) FROM judgments WHERE refused")
        with pytest.raises(duckdb.ParserException):  # a broken query is not an older warehouse
            rows(conn, "SELEC 1")


def test_a_bare_database_reads_as_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "bare.duckdb"
    duckdb.connect(str(path)).close()
    with duckdb.connect(str(path), read_only=True) as conn:
        assert rows(conn, "SELECT * FROM metrics") == [] and scalar(conn, "SELECT count(*) FROM metrics") is None
        assert table(conn, "SELECT * FROM leaderboard").empty


def test_numbers() -> None:
    assert [number(v) for v in (None, True, float("nan"), "0.5", 2, "x")] == [None, None, None, 0.5, 2.0, None]
