"""Which models and tasks the warehouse holds results for (``metrics``, ``judgments``, ``metric_trend``)."""

from __future__ import annotations

import duckdb

from themis_dagster.warehouse.read.query import number, rows


def evaluated_models(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Models with metrics (of a complete partition) or judgments."""
    found = rows(conn, "SELECT DISTINCT model FROM metrics UNION SELECT DISTINCT model FROM judgments")
    return sorted(str(row["model"]) for row in found)


def evaluated_tasks(conn: duckdb.DuckDBPyConnection, model: str | None = None) -> list[str]:
    """Tasks with metrics or judgments (of ``model``, or of any model)."""
    found = rows(
        conn,
        "SELECT DISTINCT task FROM metrics WHERE ?::VARCHAR IS NULL OR model = ? "
        "UNION SELECT DISTINCT task FROM judgments WHERE ?::VARCHAR IS NULL OR model = ?",
        [model, model, model, model],
    )
    return sorted(str(row["task"]) for row in found)


def known_models(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Every model with metrics now or in the past (a checkpoint family's members)."""
    found = rows(conn, "SELECT DISTINCT model FROM metrics UNION SELECT DISTINCT model FROM metric_trend")
    return sorted(str(row["model"]) for row in found)


def metric_values(
    conn: duckdb.DuckDBPyConnection, model: str, task: str, metric: str
) -> dict[str | None, float | None]:
    """One metric of (model, task) by subset (None: the headline value); empty when it has none."""
    found = rows(
        conn, "SELECT subset, value FROM metrics WHERE model = ? AND task = ? AND metric = ?", [model, task, metric]
    )
    return {row["subset"]: number(row["value"]) for row in found}
