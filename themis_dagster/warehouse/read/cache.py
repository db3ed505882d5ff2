"""``request_cache``: how many answers each model has cached, and since when (``themis cache stats``)."""

from __future__ import annotations

import duckdb
import pandas as pd

from themis_dagster.warehouse.read.query import table


def cache_stats(conn: duckdb.DuckDBPyConnection, model: str | None = None) -> pd.DataFrame:
    """Per model (or only ``model``): cached answers, first and last cached; empty when none."""
    return table(
        conn,
        "SELECT model, count(*) AS answers, min(cached_at) AS first, max(cached_at) AS last FROM request_cache "
        "WHERE ?::VARCHAR IS NULL OR model = ? GROUP BY model ORDER BY model",
        [model, model],
    )
