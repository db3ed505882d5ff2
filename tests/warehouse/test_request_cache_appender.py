"""The request cache's chunk commits: fingerprints kept unique without a table scan; slow engine calls run released."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl

from themis_dagster.resources import WarehouseResource
from themis_dagster.warehouse.request_cache import CACHE, FAST_ENGINE_S, HOLD_S, CacheAppender, cached_count
from themis_dagster.warehouse.schema import ensure_schema
from themis_dagster.warehouse.tables import declared


def _rows(fingerprints: list[str], repeated: list[bool] | None = None) -> pl.DataFrame:
    schema = declared(CACHE).frame_schema
    frame = pl.DataFrame({name: [None] * len(fingerprints) for name in schema}, schema=schema).with_columns(
        pl.Series("fingerprint", fingerprints, dtype=pl.String),
        pl.lit("m").alias("model"),
        pl.lit("loglikelihood").alias("request_type"),
        pl.lit(datetime(2026, 1, 1)).cast(pl.Datetime("us")).alias("cached_at"),
    )
    return frame.with_columns(pl.Series("_repeated", repeated or [False] * len(fingerprints), dtype=pl.Boolean))


def _fingerprints(path: Path) -> list[str]:
    with duckdb.connect(str(path), read_only=True) as conn:
        return [row[0] for row in conn.execute(f"SELECT fingerprint FROM {CACHE} ORDER BY fingerprint").fetchall()]


def _warehouse(tmp_path: Path) -> tuple[Path, WarehouseResource]:
    path = tmp_path / "w.duckdb"
    warehouse = WarehouseResource(database=str(path))
    with warehouse.connect() as conn:
        ensure_schema(conn)
    return path, warehouse


def test_another_writers_rows_are_checked_and_a_repeated_fingerprint_is_kept_once(tmp_path: Path) -> None:
    path, warehouse = _warehouse(tmp_path)
    with CacheAppender(warehouse.get_connection, 0) as cache:
        assert cache.append(_rows(["a", "r", "r"], [False, True, True]), engine_seconds=1.0) == 2
        assert cache.append(_rows(["r", "b"], [True, False]), engine_seconds=1.0) == 1  # r: this run wrote it
        assert cache.anti_joins == 0
        with warehouse.get_connection() as other:  # another run, between two chunks, answers "c" too
            other.register("rows", _rows(["c"]).drop("_repeated").to_arrow())
            other.execute(f"INSERT INTO {CACHE} SELECT * FROM rows")
        assert cache.append(_rows(["c", "d"]), engine_seconds=1.0) == 1
        assert cache.anti_joins == 1
        assert cache.append(_rows(["e"]), engine_seconds=1.0) == 1
        assert cache.anti_joins == 1  # the count is what this run expects again: no scan
    assert _fingerprints(path) == ["a", "b", "c", "d", "e", "r"]


def test_the_warehouse_is_held_only_across_fast_engine_calls_and_only_for_a_while(tmp_path: Path) -> None:
    path, warehouse = _warehouse(tmp_path)
    now = [0.0]
    with CacheAppender(warehouse.get_connection, 0, clock=lambda: now[0]) as cache:
        cache.append(_rows(["a"]), engine_seconds=FAST_ENGINE_S / 10)
        assert cache.holding  # the next engine call is expected fast: kept open
        now[0] += HOLD_S / 2
        cache.append(_rows(["b"]), engine_seconds=FAST_ENGINE_S / 10)
        assert cache.holding
        now[0] += HOLD_S
        cache.append(_rows(["c"]), engine_seconds=FAST_ENGINE_S / 10)
        assert not cache.holding  # held long enough: others get their turn
        cache.append(_rows(["d"]), engine_seconds=FAST_ENGINE_S * 2)
        assert not cache.holding  # a slow engine call never runs while the warehouse is held
        with duckdb.connect(str(path), read_only=True) as reader:  # released: another process could open it
            assert cached_count(reader) == 4
        cache.append(None, engine_seconds=0.0)
        assert not cache.holding
    assert not cache.holding
    assert _fingerprints(path) == ["a", "b", "c", "d"]
