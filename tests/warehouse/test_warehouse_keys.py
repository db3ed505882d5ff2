"""Each table's key stays unique on a DuckDB file without a PRIMARY KEY constraint.

New warehouses are created without the constraint (DuckDB's index made stage writes several
times slower); ``replace_rows`` keeps keys unique instead. Warehouses created with the
constraint keep it and keep working. DuckLake's side: tests/warehouse/test_cluster_ducklake.py.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from themis_dagster.exchange import Request
from themis_dagster.warehouse.frames import rows_frame, to_frame
from themis_dagster.warehouse.migrate import drop_primary_keys, keyed_tables
from themis_dagster.warehouse.partitions import (
    DuplicateKeyError,
    Write,
    partition_scope,
    replace_partition,
    replace_rows,
)
from themis_dagster.warehouse.reads import read_partition
from themis_dagster.warehouse.schema import ensure_schema
from themis_dagster.warehouse.tables import TABLES

KEYED = [name for name, table in TABLES.items() if table.primary_key]


def _prompts(n: int, tag: str = "") -> pl.DataFrame:
    requests = [Request(f"r{i}", f"i{i // 2}", "loglikelihood", context=tag, continuation=f"c{i}") for i in range(n)]
    return to_frame("prompts", requests, model="m", task="t")


def _lineage(stage: str, run: str) -> pl.DataFrame:
    row = {"model": "m", "task": "t", "stage": stage, "materialization": run, "upstream_materialization": None,
           "generation": run, "run_id": run, "written_at": datetime(2026, 11, 23)}  # fmt: skip
    return rows_frame("stage_generations", [row])


def _stage_write(conn: duckdb.DuckDBPyConnection, frame: pl.DataFrame, run: str) -> None:
    """A stage's write as ``evaluation/stage_io.py`` makes it: its rows and its lineage row, scoped by the partition."""
    scope = partition_scope("m", "t")
    replace_rows(
        conn,
        [
            Write("prompts", frame, scope),
            Write("stage_generations", _lineage("prompts", run), scope | {"stage": "prompts"}),
        ],
    )


def _duplicates(conn: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Per keyed table: rows beyond one per key (0 everywhere when keys are unique)."""
    found = {}
    for name in KEYED:
        key = ", ".join(f'"{column}"' for column in TABLES[name].primary_key)
        row = conn.execute(f'SELECT count(*) - count(DISTINCT ({key})) FROM "{name}"').fetchone()
        found[name] = int(row[0]) if row else 0
    return found


def test_new_warehouses_have_no_primary_key_and_reruns_keep_keys_unique(tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_schema(conn)
        assert conn.execute(
            "SELECT count(*) FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'"
        ).fetchone() == (0,)
        for run in ("a", "b", "c"):  # a re-run replaces the partition's rows and its lineage row
            _stage_write(conn, _prompts(6, run), run)
        other = _prompts(4).with_columns(pl.lit("other").alias("task"))
        replace_partition(conn, "prompts", other, "m", "other")
        assert read_partition(conn, "prompts", "m", "t")["context"].unique().to_list() == ["c"]
        assert read_partition(conn, "prompts", "m", "other").height == 4
        assert conn.execute("SELECT count(*) FROM stage_generations").fetchone() == (1,)
        assert _duplicates(conn) == dict.fromkeys(KEYED, 0)


def test_a_frame_with_a_repeated_key_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_schema(conn)
        _stage_write(conn, _prompts(4, "old"), "a")
        repeated = pl.concat([_prompts(3, "new"), _prompts(2, "new")])
        with pytest.raises(DuplicateKeyError, match=r"prompts: duplicate request_id .*\('r0',\), \('r1',\)"):
            _stage_write(conn, repeated, "b")
        assert read_partition(conn, "prompts", "m", "t")["context"].to_list() == ["old"] * 4
        assert read_partition(conn, "stage_generations", "m", "t")["run_id"].to_list() == ["a"]
        lineage = pl.concat([_lineage("prompts", "b"), _lineage("prompts", "c")])
        with pytest.raises(DuplicateKeyError, match="stage_generations: 2 rows for the one key"):
            replace_rows(conn, [Write("stage_generations", lineage, partition_scope("m", "t") | {"stage": "prompts"})])
        with pytest.raises(ValueError, match=r"scoped by \['item_id'\]"):  # a scope that does not cover a key
            replace_rows(conn, [Write("prompts", _prompts(2), partition_scope("m", "t") | {"item_id": "i0"})])
        assert _duplicates(conn) == dict.fromkeys(KEYED, 0)


def test_a_warehouse_created_with_primary_keys_keeps_them_and_works(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as old:  # the DDL every warehouse was created with before
        for table in TABLES.values():
            old.execute(table.ddl(constraints=True))
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        keys = conn.execute("SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'")
        assert sorted(row[0] for row in keys.fetchall()) == sorted(KEYED)
        for run in ("a", "b"):
            _stage_write(conn, _prompts(6, run), run)
        assert read_partition(conn, "prompts", "m", "t")["context"].unique().to_list() == ["b"]
        with pytest.raises(DuplicateKeyError):  # refused before DuckDB's own key would be
            _stage_write(conn, pl.concat([_prompts(2), _prompts(2)]), "c")
        with pytest.raises(duckdb.ConstraintException):  # and the constraint is still there
            conn.execute("INSERT INTO prompts (model, task, request_id, item_id, request_type) "
                         "VALUES ('m', 't', 'r0', 'i0', 'chat')")  # fmt: skip
        assert _duplicates(conn) == dict.fromkeys(KEYED, 0)


def test_migrate_rebuilds_a_keyed_warehouse_without_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as old:
        for table in TABLES.values():
            old.execute(table.ddl(constraints=True))
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        _stage_write(conn, _prompts(6, "kept"), "a")
        before = read_partition(conn, "prompts", "m", "t")
        assert drop_primary_keys(conn) == sorted(KEYED)
        assert keyed_tables(conn) == []
        assert read_partition(conn, "prompts", "m", "t").equals(before)
        assert read_partition(conn, "stage_generations", "m", "t")["run_id"].to_list() == ["a"]
        assert conn.execute("SELECT count(*) FROM partition_status").fetchone() is not None  # the views read
        assert drop_primary_keys(conn) == []  # nothing left to do
        _stage_write(conn, _prompts(3, "new"), "b")
        assert read_partition(conn, "prompts", "m", "t").height == 3
        assert _duplicates(conn) == dict.fromkeys(KEYED, 0)
