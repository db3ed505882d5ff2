"""The ``metrics`` view (complete partitions only), its headline rows and ``metric_trend`` (every materialization).

Every reader of metric values goes through here, so a partition a killed run left half-written
(``partition_status``) is hidden everywhere at once, not only where someone remembered the view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import polars as pl

from themis_dagster.exchange import MetricValue
from themis_dagster.warehouse.read.query import frame, number, rows


@dataclass(frozen=True)
class MetricRecord(MetricValue):
    """One metric value (subset None: the headline value) of one model on one task, and when it was materialized.

    A task's ``MetricValue`` (subset, metric, value, ci_low, ci_high, n), then its owners.
    """

    model: str
    task: str
    materialized_at: datetime | None = None


COLUMNS = "model, task, subset, metric, value, ci_low, ci_high, n, materialized_at"


def records(found: Sequence[dict[str, Any]]) -> list[MetricRecord]:
    """Rows with :data:`COLUMNS` as records (NaN and NULL values read as None)."""
    return [
        MetricRecord(
            model=str(row["model"]),
            task=str(row["task"]),
            subset=None if row.get("subset") is None else str(row["subset"]),
            metric=str(row["metric"]),
            value=number(row.get("value")),
            ci_low=number(row.get("ci_low")),
            ci_high=number(row.get("ci_high")),
            n=int(row.get("n") or 0),
            materialized_at=row.get("materialized_at"),
        )
        for row in found
    ]


def headline(conn: duckdb.DuckDBPyConnection, model: str | None = None) -> list[MetricRecord]:
    """Headline values (subset NULL) of ``model`` (None: of every model), by task, metric and model."""
    return records(
        rows(
            conn,
            f"SELECT {COLUMNS} FROM metrics WHERE subset IS NULL AND (?::VARCHAR IS NULL OR model = ?) "  # noqa: S608
            "ORDER BY task, metric, model",
            [model, model],
        )
    )


def subsets(conn: duckdb.DuckDBPyConnection, model: str) -> list[MetricRecord]:
    """``model``'s subset values, by task, metric and subset."""
    return records(
        rows(
            conn,
            f"SELECT {COLUMNS} FROM metrics WHERE model = ? AND subset IS NOT NULL "  # noqa: S608
            "ORDER BY task, metric, subset",
            [model],
        )
    )


def history(conn: duckdb.DuckDBPyConnection, models: Sequence[str]) -> list[MetricRecord]:
    """Every materialization of the headline values of ``models`` (``metric_trend``), oldest first."""
    return records(
        rows(
            conn,
            f"SELECT {COLUMNS} FROM metric_trend WHERE subset IS NULL "  # noqa: S608
            "AND list_contains(?::VARCHAR[], model) ORDER BY task, metric, model, materialized_at",
            [list(models)],
        )
    )


def matching(conn: duckdb.DuckDBPyConnection, model: str, pattern: str) -> list[dict[str, Any]]:
    """``model``'s headline values of the metrics whose name matches ``pattern`` (ILIKE), by task and metric."""
    return rows(
        conn,
        "SELECT task, metric, value, ci_low, ci_high, n FROM metrics WHERE model = ? AND subset IS NULL "
        "AND metric ILIKE ? ORDER BY task, metric",
        [model, pattern],
    )


def metric_subsets(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> dict[str, list[str | None]]:
    """Each metric of (model, task) with its subsets, the headline (None) first."""
    found: dict[str, list[str | None]] = {}
    for row in rows(
        conn,
        "SELECT metric, subset FROM metrics WHERE model = ? AND task = ? ORDER BY metric, subset NULLS FIRST",
        [model, task],
    ):
        found.setdefault(str(row["metric"]), []).append(row["subset"])
    return found


def headline_frame(conn: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every model's headline values that have a value (what the leaderboard ranks), as a polars frame."""
    return frame(
        conn,
        "SELECT model, task, metric, value, ci_low, ci_high, n FROM metrics WHERE subset IS NULL AND value IS NOT NULL",
    )


def subset_values(
    conn: duckdb.DuckDBPyConnection, model: str, task: str, names: Sequence[str], *, headline: bool = False
) -> list[MetricRecord]:
    """The subset values of these metrics of (model, task) (``headline``: and their headline values, first), by
    metric and subset; a family's figures and the counterfactual pairs' summary read them."""
    return records(
        rows(
            conn,
            f"SELECT {COLUMNS} FROM metrics WHERE model = ? AND task = ? AND (? OR subset IS NOT NULL) "  # noqa: S608
            "AND list_contains(?::VARCHAR[], metric) ORDER BY metric, subset NULLS FIRST",
            [model, task, headline, list(names)],
        )
    )
