"""A damaged warehouse is reported and never written to; a missing one is simply new."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, ExecuteInProcessResult, asset, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.resources import WarehouseResource
from themis_dagster.warehouse.integrity import WarehouseCorruptedError, check_warehouse
from themis_dagster.warehouse.schema import ensure_schema


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real warehouse (our schema) with rows in several blocks; its catalog sits before its last data.

    Dropping the first table frees blocks at the front, where the last checkpoint writes the
    metadata: a cut at the end then loses data blocks only, which DuckDB opens without noticing.
    """
    path = tmp_path_factory.mktemp("sound") / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        conn.execute("CREATE TABLE early AS SELECT i, repeat('a', 100) || i AS s FROM range(200000) r(i)")
        conn.execute("CHECKPOINT")
        conn.execute("CREATE TABLE answers AS SELECT i, repeat('b', 100) || i AS s FROM range(200000) r(i)")
        conn.execute("CHECKPOINT")
        conn.execute("DROP TABLE early")
        conn.execute("CHECKPOINT")
        conn.execute("CREATE TABLE small AS SELECT i FROM range(100) r(i)")
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _damaged(sound: Path, target: Path, kind: str) -> Path:
    size = sound.stat().st_size
    if kind == "random":
        target.write_bytes(os.urandom(size // 2))
    elif kind == "empty":
        target.write_bytes(b"")
    else:
        shutil.copy(sound, target)
        with target.open("r+b") as handle:
            handle.truncate(size // 2 if kind == "half" else size - 3 * 262144)
    return target


DAMAGE = ["half", "tail", "random", "empty"]


def _failed_with(result: ExecuteInProcessResult) -> list[str]:
    """The exception classes behind each failed step (Dagster wraps the asset's own error)."""
    names = []
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error
        while error is not None and error.cls_name == "DagsterExecutionStepExecutionError":
            error = error.cause
        names.append(error.cls_name if error is not None else "")
    return names


def test_a_missing_file_is_a_new_warehouse(tmp_path: Path) -> None:
    path = tmp_path / "new" / "warehouse.duckdb"
    check_warehouse(path)
    with WarehouseResource(database=str(path)).connect() as conn:
        conn.execute("CREATE TABLE t AS SELECT 1 AS one")
    assert path.is_file()


def test_a_sound_warehouse_passes_also_after_its_rows_are_deleted(sound: Path, tmp_path: Path) -> None:
    check_warehouse(sound)
    copy = tmp_path / "copy.duckdb"
    shutil.copy(sound, copy)
    with duckdb.connect(str(copy)) as conn:
        conn.execute("DELETE FROM answers")  # DuckDB then shortens the file: free blocks at its end go
    assert copy.stat().st_size < sound.stat().st_size
    check_warehouse(copy)


def test_a_tail_cut_is_reported_whether_or_not_duckdb_notices(sound: Path, tmp_path: Path) -> None:
    """duckdb 1.5.6 opened a tail-cut file and counted its rows happily; 1.5.5 (the DuckLake pin) fails the count.

    The check must not depend on either: it reports the missing blocks itself.
    """
    path = _damaged(sound, tmp_path / "tail.duckdb", "tail")
    with contextlib.suppress(duckdb.IOException), duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM answers").fetchone() == (200000,)
    with pytest.raises(WarehouseCorruptedError):
        check_warehouse(path)


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_file_is_reported_and_left_as_it_was(sound: Path, tmp_path: Path, kind: str) -> None:
    path = _damaged(sound, tmp_path / f"{kind}.duckdb", kind)
    before = _sha(path)
    resource = WarehouseResource(database=str(path), lock_timeout_s=5)
    with pytest.raises(WarehouseCorruptedError) as caught, resource.connect():
        pytest.fail("a connection was opened")
    assert str(path) in str(caught.value) and "was not written to" in str(caught.value)
    assert _sha(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no WAL, no replacement


@asset
def writes(warehouse: WarehouseResource) -> None:
    with warehouse.connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS written AS SELECT 1 AS one")


@pytest.mark.parametrize("kind", ["half", "random"])
def test_a_run_fails_before_writing(sound: Path, tmp_path: Path, kind: str) -> None:
    path = _damaged(sound, tmp_path / "warehouse.duckdb", kind)
    before = _sha(path)
    result = materialize([writes], resources={"warehouse": WarehouseResource(database=str(path))}, raise_on_error=False)
    assert not result.success
    assert _failed_with(result) == ["WarehouseCorruptedError"]
    assert _sha(path) == before


@requires_mirror
def test_an_evaluation_fails_before_writing(sound: Path, tmp_path: Path, instance: DagsterInstance) -> None:
    path = _damaged(sound, tmp_path / "warehouse.duckdb", "half")
    before = _sha(path)
    overrides = write_overrides(tmp_path / "o.yaml", {"crows_pairs": {"limit": 4}})
    instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
    result = materialize(
        evaluation_assets,
        partition_key=evaluation_key(DEFAULT_MODEL_ID, "crows_pairs"),
        resources=make_resources(path, overrides),
        instance=instance,
        raise_on_error=False,
    )
    assert not result.success
    assert _failed_with(result) == ["WarehouseCorruptedError"]
    assert _sha(path) == before
