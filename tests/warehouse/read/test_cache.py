"""``themis cache stats`` reads the request cache through the layer."""

from __future__ import annotations

import duckdb

from tests.warehouse.read.synthetic import A, B
from themis_dagster.warehouse.read.cache import cache_stats


def test_cache_stats(conn: duckdb.DuckDBPyConnection) -> None:
    stats = cache_stats(conn)
    assert list(stats["model"]) == [A, B] and list(stats["answers"]) == [2, 1]
    assert list(cache_stats(conn, B)["answers"]) == [1] and cache_stats(conn, "nobody").empty
