"""The DuckLake warehouse on a real PostgreSQL catalog that this module starts: many writers, atomic partitions.

- four processes replace their partitions of one table, three times each, at once: DuckLake's
  table-level conflicts are retried, and afterwards every partition holds exactly its rows;
- a commit that loses and has no retries left fails naming the table, and the partition keeps
  its previous rows;
- the evaluation job runs on it (fake engine) and every analyst view runs on it;
- an unreachable catalog fails naming THEMIS_WAREHOUSE.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
from pathlib import Path

import duckdb
import polars as pl
import pytest

from deploy.local_stack import Postgres, free_port, why_no_postgres
from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.resources import WarehouseResource
from themis_dagster.runs.reachability import UnreachableError
from themis_dagster.warehouse import ducklake
from themis_dagster.warehouse.ducklake import (
    EXTENSION_PACKAGES,
    CommitConflictError,
    WarehouseConfigError,
    connect,
    extension_file,
    with_commit_retries,
)
from themis_dagster.warehouse.partitions import replace_partition
from themis_dagster.warehouse.reads import read_partition
from themis_dagster.warehouse.tables import declared


def _why_no_ducklake() -> str | None:
    """None if the DuckLake and postgres extensions load into this duckdb from their packages."""
    try:
        for name in EXTENSION_PACKAGES:
            extension_file(name)
    except WarehouseConfigError as error:
        return str(error)
    return None


pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(why_no_postgres() is not None, reason=str(why_no_postgres())),
    pytest.mark.skipif(_why_no_ducklake() is not None, reason=str(_why_no_ducklake())),
]
TABLE = "task_items"


@pytest.fixture(scope="module")
def catalog(ducklake_postgres: Postgres) -> Postgres:
    """The session's PostgreSQL server (tests/conftest.py), database ``lake``."""
    return ducklake_postgres


@pytest.fixture(scope="module")
def lake(catalog: Postgres, tmp_path_factory: pytest.TempPathFactory) -> WarehouseResource:
    """One DuckLake database for the module (its data path is fixed in the catalog); tests use distinct models."""
    data = tmp_path_factory.mktemp("lake-data")
    return WarehouseResource(database=f"ducklake:postgres:{catalog.dsn}", data_path=str(data))


def _items(model: str, task: str, n: int, version: int) -> pl.DataFrame:
    rows = [
        {"model": model, "task": task, "item_id": f"i{i}", "subset": f"v{version}", "fields": json.dumps({"i": i}),
         "dataset_sha256": "0" * 64}
        for i in range(n)
    ]  # fmt: skip
    return pl.DataFrame(rows, schema=declared(TABLE).frame_schema)


def _writer(database: str, data_path: str, model: str, rounds: int) -> None:
    lake = WarehouseResource(database=database, data_path=data_path)
    for version in range(rounds):
        with lake.connect() as conn:
            replace_partition(conn, TABLE, _items(model, "crows_pairs", 5 + version, version), model, "crows_pairs")


def test_concurrent_writers_leave_every_partition_exactly_its_rows(lake: WarehouseResource) -> None:
    with lake.connect() as conn:  # the schema once, before the writers race
        assert conn.execute("SELECT count(*) FROM task_items WHERE model LIKE 'm_'").fetchone() == (0,)
    ctx = multiprocessing.get_context("spawn")
    models = [f"m{i}" for i in range(4)]
    workers = [ctx.Process(target=_writer, args=(lake.database, lake.data_path, m, 2)) for m in models]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=600)
    assert [worker.exitcode for worker in workers] == [0] * 4
    with lake.connect() as conn:
        rows = conn.execute(
            "SELECT model, count(*), count(DISTINCT item_id), min(subset), max(subset) FROM task_items "
            "WHERE task = 'crows_pairs' AND model LIKE 'm_' GROUP BY model ORDER BY model"
        ).fetchall()
    assert rows == [(m, 6, 6, "v1", "v1") for m in models]  # the last round's 6 rows, none twice, none older


def test_a_commit_losing_every_retry_fails_naming_the_table_and_keeps_the_old_rows(lake: WarehouseResource) -> None:
    with lake.connect() as conn:
        replace_partition(conn, TABLE, _items("old", "bbq", 3, 0), "old", "bbq")
        replace_partition(conn, TABLE, _items("other", "bbq", 3, 0), "other", "bbq")
    slow, fast = connect(lake.database, lake.data_path), connect(lake.database, lake.data_path)
    try:

        def losing_write() -> None:
            slow.execute("BEGIN TRANSACTION")
            try:
                slow.execute("DELETE FROM task_items WHERE model = ? AND task = ?", ["old", "bbq"])
                replace_partition(fast, TABLE, _items("other", "bbq", 4, 1), "other", "bbq")  # commits first
                slow.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.TransactionException):  # a failed COMMIT already ended it
                    slow.execute("ROLLBACK")
                raise

        with pytest.raises(CommitConflictError, match=r"task_items old\|bbq: still conflicting .* previous rows"):
            with_commit_retries(losing_write, "task_items old|bbq", attempts=1)
    finally:
        slow.close()
        fast.close()
    with lake.connect() as conn:
        assert read_partition(conn, TABLE, "old", "bbq").height == 3
        assert read_partition(conn, TABLE, "other", "bbq").height == 4


def test_retries_are_bounded_and_only_for_conflicts() -> None:
    calls: list[int] = []

    def conflicting() -> None:
        calls.append(1)
        raise duckdb.TransactionException("Transaction conflict: cannot delete from table")

    with pytest.raises(CommitConflictError, match="after 3 commits"):
        with_commit_retries(conflicting, "t", attempts=3, base_delay_s=0.001)
    assert len(calls) == 3

    def broken() -> None:
        calls.append(1)
        raise duckdb.CatalogException("no such table")

    with pytest.raises(duckdb.CatalogException):
        with_commit_retries(broken, "t", attempts=3)
    assert len(calls) == 4


@requires_mirror
def test_the_evaluation_runs_on_ducklake_and_the_views_read_it(lake: WarehouseResource, tmp_path: Path) -> None:
    from dagster import DagsterInstance

    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.settings import Settings

    model = "smollm2-135m-instruct"
    overrides = write_overrides(tmp_path / "overrides.yaml", {"crows_pairs": {"limit": 3}})
    resources = make_resources(tmp_path / "unused.duckdb", overrides)
    resources["warehouse"] = lake
    job = build_definitions(Settings(engine="fake")).resolve_job_def("evaluate")
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [model])
        result = job.execute_in_process(
            instance=instance, resources=resources, partition_key=evaluation_key(model, "crows_pairs")
        )
        assert result.success
    with lake.connect() as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM task_items WHERE model = ?), "
            "(SELECT count(DISTINCT item_id) FROM task_items WHERE model = ?), "
            "(SELECT count(*) FROM judgments WHERE model = ?)",
            [model, model, model],
        ).fetchone()
        assert counts == (3, 3, 3)
        views = {row[0] for row in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        for view in sorted(views):
            conn.execute(f'SELECT * FROM "{view}" LIMIT 1').fetchall()  # every analyst view runs on DuckLake
        assert conn.execute("SELECT count(*) FROM metric_values WHERE model = ?", [model]).fetchone()[0] > 0


def test_an_unreachable_catalog_fails_naming_the_setting(tmp_path: Path) -> None:
    nowhere = WarehouseResource(
        database=f"ducklake:postgres:dbname=lake host=127.0.0.1 port={free_port()}", data_path=str(tmp_path / "d")
    )
    unreachable = r"^THEMIS_WAREHOUSE \(the DuckLake catalog\): cannot reach"
    with pytest.raises(UnreachableError, match=unreachable), nowhere.connect():
        pass


class _InitRace:
    """A connection whose first ATTACHes fail as when another process is creating the same new catalog."""

    def __init__(self, failures: int, message: str = ducklake.INIT_RACE + ": duplicate key value") -> None:
        self.failures, self.message, self.calls = failures, message, 0

    def execute(self, statement: str) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise duckdb.Error(self.message)


def test_attach_waits_out_another_process_creating_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ducklake.time, "sleep", lambda seconds: None)
    conn = _InitRace(failures=2)
    ducklake.attach_with_init_retries(conn, "ATTACH 'ducklake:postgres:...' AS lake")  # type: ignore[arg-type]
    assert conn.calls == 3
    with pytest.raises(duckdb.Error, match="Failed to initialize"):
        ducklake.attach_with_init_retries(_InitRace(failures=9), "ATTACH ...", attempts=3)  # type: ignore[arg-type]
    other = _InitRace(failures=1, message="IO Error: could not connect")
    with pytest.raises(duckdb.Error, match="could not connect"):
        ducklake.attach_with_init_retries(other, "ATTACH ...")  # type: ignore[arg-type]
    assert other.calls == 1  # any other error is not retried
