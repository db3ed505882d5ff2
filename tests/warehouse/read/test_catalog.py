"""Which models and tasks have results: complete partitions' metrics, or judgments."""

from __future__ import annotations

import duckdb

from tests.warehouse.read.synthetic import MODELS, A, B
from themis_dagster.warehouse.read.catalog import evaluated_models, evaluated_tasks, known_models, metric_values


def test_models_and_tasks_with_results(conn: duckdb.DuckDBPyConnection) -> None:
    assert evaluated_models(conn) == sorted(MODELS) == known_models(conn)
    assert evaluated_tasks(conn, A) == ["bbq", "crows_pairs_prompted", "gb_direct", "honest"]
    assert evaluated_tasks(conn, B) == ["bbq", "gb_direct"]  # its crows_pairs_prompted partition is incomplete
    assert "honest" in evaluated_tasks(conn)


def test_one_metric_by_subset(conn: duckdb.DuckDBPyConnection) -> None:
    assert metric_values(conn, A, "bbq", "s_dis") == {None: 0.1, "age": 0.2, "race": 0.0}
    assert metric_values(conn, B, "crows_pairs_prompted", "pct_stereotype") == {}  # hidden until completed
