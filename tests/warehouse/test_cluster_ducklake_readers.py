"""The readers on a DuckLake warehouse (real PostgreSQL catalog): ``themis sql``, snapshot, reports, drill-down.

One evaluated lake and one DuckDB file holding the same run (fake engine: these tests are
about the readers) are shared by the module:
- the read-only door stays shut on the lake: the hostile statements of test_sql_door.py and
  the lake's own escapes (its data folder, ``postgres_query``, DuckLake maintenance) are refused
  and change nothing; a catalog role that may only SELECT refuses the rest in PostgreSQL too;
- an analyst's SELECTs over the views, the leaderboard, the reports and the drill-down read the
  same rows on the lake as on the file;
- ``themis snapshot`` copies one DuckLake snapshot to a DuckDB file, also an older one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
import subprocess
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pytest

from deploy.local_stack import Postgres, postgres_bin, why_no_postgres
from tests.conftest import make_resources, requires_mirror, write_overrides
from tests.warehouse.test_cluster_ducklake import _why_no_ducklake
from tests.warehouse.test_sql_door import _hostile
from themis_dagster import cli
from themis_dagster.reports.summary import drilldown_command
from themis_dagster.resources import WarehouseResource
from themis_dagster.warehouse.partitions import replace_partition
from themis_dagster.warehouse.readonly import (
    RefusedQuery,
    checked_statements,
    connect_read_only,
    query_read_only,
    run_read_only,
)
from themis_dagster.warehouse.tables import declared

pytestmark = [
    pytest.mark.cluster,
    requires_mirror,
    pytest.mark.skipif(why_no_postgres() is not None, reason=str(why_no_postgres())),
    pytest.mark.skipif(_why_no_ducklake() is not None, reason=str(_why_no_ducklake())),
]
MODEL = "smollm2-135m-instruct"
TASK = "crows_pairs"
METADATA = "__ducklake_metadata_themis_lake"  # the catalog database DuckLake attaches
LIMIT = 40  # enough rows that DuckLake writes Parquet files (it inlines small inserts in the catalog)


@dataclasses.dataclass(frozen=True)
class Warehouses:
    lake: str  # THEMIS_WAREHOUSE of the lake, as the catalog's owner
    reader: str  # the same lake through a catalog role that may only SELECT
    data: Path  # the lake's data folder
    file: Path  # a DuckDB file holding the same run
    lake_reports: Path
    file_reports: Path
    catalog: Postgres


def _psql(pg: Postgres, *statements: str) -> None:
    psql = postgres_bin()
    assert psql is not None
    for statement in statements:
        command = [str(psql / "psql"), "-h", pg.host, "-p", str(pg.port), "-U", pg.user, "-d", pg.dbname]
        subprocess.run([*command, "-v", "ON_ERROR_STOP=1", "-c", statement], check=True, capture_output=True)


def _evaluate(warehouse: WarehouseResource, root: Path) -> Path:
    """The evaluation and the reports jobs on ``warehouse``; returns the reports folder."""
    from dagster import DagsterInstance

    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.settings import Settings

    root.mkdir()
    overrides = write_overrides(root / "overrides.yaml", {TASK: {"limit": LIMIT}})
    resources = make_resources(root / "unused.duckdb", overrides)
    resources["warehouse"] = warehouse
    defs = build_definitions(Settings(engine="fake"))
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        evaluated = defs.resolve_job_def("evaluate").execute_in_process(
            instance=instance, resources=resources, partition_key=evaluation_key(MODEL, TASK)
        )
        assert evaluated.success
        assert defs.resolve_job_def("reports").execute_in_process(instance=instance, resources=resources).success
    return root / "reports"


@pytest.fixture(scope="module")
def warehouses(ducklake_postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> Warehouses:
    pg = dataclasses.replace(ducklake_postgres, dbname="readers")
    root = tmp_path_factory.mktemp("readers")
    data = root / "lake-data"
    lake = WarehouseResource(database=f"ducklake:postgres:{pg.dsn}", data_path=str(data))
    lake_reports = _evaluate(lake, root / "on-lake")
    file = root / "warehouse.duckdb"
    file_reports = _evaluate(WarehouseResource(database=str(file)), root / "on-file")
    _psql(
        pg,
        "CREATE ROLE analyst LOGIN",
        "GRANT CONNECT ON DATABASE readers TO analyst",
        "GRANT USAGE ON SCHEMA public TO analyst",
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO analyst",
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO analyst",
    )
    reader = f"ducklake:postgres:dbname=readers host={pg.host} port={pg.port} user=analyst"
    return Warehouses(lake.database, reader, data, file, lake_reports, file_reports, pg)


_STAMPS = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z| UTC)?"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\brun [0-9a-f]{8}\b"
)


def _unstamped(page: Path) -> str:
    return _STAMPS.sub("<stamp>", page.read_text())


def _sql(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["sql", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def _snapshot_count(w: Warehouses) -> int:
    with connect_read_only(w.lake) as conn:
        row = conn.execute("SELECT count(*) FROM ducklake_snapshots('themis_lake')").fetchone()
    assert row is not None
    return int(row[0])


def _lake_escapes(w: Warehouses, elsewhere: Path) -> list[str]:
    inside = next(w.data.rglob("*.parquet"))
    return [
        f"COPY (SELECT 'x') TO '{w.data / 'planted.csv'}'",
        f"COPY judgments TO '{inside}' (FORMAT parquet)",
        f"EXPORT DATABASE '{w.data / 'export'}'",
        "SELECT * FROM postgres_query('__ducklake_metadata_themis_lake', 'SELECT pg_read_file(''/etc/hostname'')')",
        "SELECT * FROM postgres_execute('__ducklake_metadata_themis_lake', 'DROP TABLE ducklake_snapshot')",
        "SELECT 1 WHERE 1 IN (SELECT 1 FROM postgres_query('__ducklake_metadata_themis_lake', 'SELECT 1'))",
        "SELECT * FROM ducklake_expire_snapshots('themis_lake', older_than => now())",
        "SELECT * FROM ducklake_cleanup_old_files('themis_lake', cleanup_all => true)",
        "SELECT * FROM ducklake_merge_adjacent_files('themis_lake')",
        "SELECT * FROM query('SELECT * FROM postgres_query(''__ducklake_metadata_themis_lake'', ''SELECT 1'')')",
        "EXPLAIN SELECT * FROM postgres_query('__ducklake_metadata_themis_lake', 'SELECT 1')",
        f"ATTACH 'postgres:{w.catalog.dsn}' AS pg",
        f"ATTACH 'ducklake:postgres:{w.catalog.dsn}' AS rw (DATA_PATH '{w.data}')",
        "DELETE FROM __ducklake_metadata_themis_lake.ducklake_snapshot",
        f"SELECT * FROM read_parquet('{elsewhere}')",
        "SELECT * FROM read_csv('/etc/passwd')",
    ]


def test_the_door_stays_shut_on_the_lake(
    warehouses: Warehouses, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The catalog's owner (a superuser here) behind the door: the statement check refuses what DuckDB would run."""
    w = warehouses
    monkeypatch.setenv("THEMIS_WAREHOUSE", w.lake)
    elsewhere = tmp_path / "out" / "stolen.csv"
    elsewhere.parent.mkdir()
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as conn:
        conn.execute("CREATE TABLE secrets AS SELECT 'kept' AS value")
    before, snapshots = _digests(w.data), _snapshot_count(w)
    inside = next(w.data.rglob("*.parquet"))
    # test_sql_door.py's statements on one door connection (a connection costs ~1 s here), reading
    # the lake's own files aside: that is reading the warehouse
    hostile = [q for q in _hostile(inside, other, elsewhere) if not q.startswith("SELECT * FROM read_blob")]
    with connect_read_only(w.lake) as conn:
        for query in hostile:
            with pytest.raises(RefusedQuery):
                run_read_only(conn, query, lake=True)
    for query in _lake_escapes(w, elsewhere):  # the lake's own escapes, each through the command
        code, out, err = _sql(capsys, query)
        assert code == 2, (query, out, err)
        assert out == ""
        assert err.startswith("themis sql: refused"), (query, err)
    assert _digests(w.data) == before
    assert _snapshot_count(w) == snapshots
    assert list(elsewhere.parent.iterdir()) == []
    with duckdb.connect(str(other), read_only=True) as conn:
        assert conn.execute("SELECT value FROM secrets").fetchall() == [("kept",)]
    code, out, err = _sql(capsys, "SELECT count(*) AS n FROM judgments")  # the door still reads
    assert (code, err, out.split()) == (0, "", ["n", str(LIMIT)])


def test_the_connection_alone_refuses_files_writes_and_settings(warehouses: Warehouses, tmp_path: Path) -> None:
    """Layer 1 on the lake, without the statement check; as the SELECT-only role, PostgreSQL refuses the rest."""
    with connect_read_only(warehouses.reader) as conn:
        data = warehouses.data
        for query in (
            "SELECT * FROM read_csv('/etc/passwd')",
            f"SELECT * FROM read_text('{data}/../../../../../../etc/passwd')",  # allowed_directories is not a prefix
            f"SELECT * FROM glob('{data}/../*')",
            f"SELECT * FROM read_text('{data}x/a')",
            f"COPY (SELECT 'x') TO '{tmp_path / 'x.csv'}'",
            f"ATTACH '{tmp_path / 'o.duckdb'}' AS o",
            "INSTALL httpfs",
            "LOAD httpfs",
        ):
            with pytest.raises(duckdb.PermissionException):
                conn.execute(query)
        for query in ("SET enable_external_access = true", "SET allowed_directories = ['/']"):
            with pytest.raises(duckdb.InvalidInputException, match="locked"):
                conn.execute(query)
        for query in ("DELETE FROM judgments", "DELETE FROM __ducklake_metadata_themis_lake.ducklake_snapshot"):
            with pytest.raises(duckdb.Error, match="read-only"):
                conn.execute(query)
        with pytest.raises(duckdb.Error, match="permission denied"):  # PostgreSQL: not a superuser
            conn.execute(f"SELECT * FROM postgres_query('{METADATA}', 'SELECT pg_read_file(''/etc/hostname'')')")
        with pytest.raises(RefusedQuery, match=r"postgres_query\(\)"):
            checked_statements(conn, "SELECT * FROM postgres_query('x', 'SELECT 1')", lake=True)
        assert conn.execute("SELECT count(*) FROM metric_values WHERE model = ?", [MODEL]).fetchone()[0] > 0
    assert not list(tmp_path.iterdir())


ANALYST_QUERIES = (
    "SELECT model, task, subset, metric, value, ci_low, ci_high, n FROM metrics ORDER BY ALL",
    "SELECT item_id, outcome, continuation, logprob FROM metric_drilldown WHERE task = 'crows_pairs' "
    "AND metric = 'pct_stereotype' ORDER BY ALL",
    "SELECT item_id, subset, outcome, score, parsed, detail FROM judgments ORDER BY ALL",
    "SELECT model, task, metric, subset, value FROM metric_trend ORDER BY ALL",
    "SELECT * EXCLUDE (materialized_at) FROM leaderboard_view ORDER BY ALL",
    "SELECT * FROM parse_rates ORDER BY ALL",
    "SELECT model, task, status FROM partition_status ORDER BY ALL",
    "SELECT request_id, item_id, context, continuation FROM prompts ORDER BY ALL",
)


def test_analyst_queries_read_the_same_rows_on_the_lake_as_on_a_file(warehouses: Warehouses) -> None:
    for query in ANALYST_QUERIES:
        on_lake, on_file = query_read_only(warehouses.reader, query), query_read_only(warehouses.file, query)
        assert len(on_file) > 0, query
        pd.testing.assert_frame_equal(on_lake, on_file, check_dtype=False, obj=query)


def test_the_drilldown_command_works_on_the_lake(
    warehouses: Warehouses, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    command = shlex.split(drilldown_command(MODEL, TASK, "pct_stereotype"))
    assert command[:2] == ["themis", "sql"]
    monkeypatch.setenv("THEMIS_WAREHOUSE", warehouses.reader)
    code, out, err = _sql(capsys, "--format", "csv", *command[2:])
    assert (code, err) == (0, ""), err
    shown = out.strip().splitlines()
    assert shown[0] == "item_id,item_subset,outcome,score,parsed,text" and len(shown) == 1 + 50  # its LIMIT
    every = command[2].rsplit(" LIMIT ", 1)[0]  # the same rows, all of them, on the file
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(warehouses.file))
    code, out, err = _sql(capsys, "--format", "csv", every)
    assert (code, err) == (0, ""), err
    on_file = out.strip().splitlines()[1:]
    assert len(on_file) == 2 * LIMIT  # two sentences per pair
    assert not set(shown[1:]) - set(on_file)


def test_the_reports_and_the_leaderboard_work_on_the_lake(
    warehouses: Warehouses, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = sorted(p.relative_to(warehouses.lake_reports) for p in warehouses.lake_reports.rglob("*.html"))
    assert pages and pages == sorted(
        p.relative_to(warehouses.file_reports) for p in warehouses.file_reports.rglob("*.html")
    )
    assert any(MODEL in str(page) for page in pages)
    for page in pages:  # the same report, but for when it was made and the run that made it
        lake_page, file_page = (
            _unstamped(folder / page) for folder in (warehouses.lake_reports, warehouses.file_reports)
        )
        assert lake_page == file_page, page
    printed = []
    for target in (warehouses.reader, str(warehouses.file)):
        monkeypatch.setenv("THEMIS_WAREHOUSE", target)
        assert cli.main(["leaderboard"]) == 0
        printed.append(capsys.readouterr().out)
    assert MODEL in printed[0] and "pct_stereotype" in printed[0]
    assert printed[0] == printed[1]


def test_snapshot_copies_one_lake_snapshot_to_a_file(
    warehouses: Warehouses, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    w = warehouses
    monkeypatch.setenv("THEMIS_WAREHOUSE", w.reader)
    assert cli.main(["snapshot", str(tmp_path / "now.duckdb")]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith(f"{tmp_path / 'now.duckdb'} (DuckLake snapshot ")
    version = int(printed.rsplit(" ", 1)[1].rstrip(")"))
    later = pl.DataFrame(
        [{"model": "later", "task": TASK, "item_id": "x", "subset": None, "fields": "{}", "dataset_sha256": "0" * 64}],
        schema=declared("task_items").frame_schema,
    )
    with WarehouseResource(database=w.lake, data_path=str(w.data)).connect() as conn:  # a commit after the copy
        replace_partition(conn, "task_items", later, "later", TASK)
    count = "SELECT count(*) AS n FROM task_items"
    assert query_read_only(tmp_path / "now.duckdb", count)["n"].tolist() == [LIMIT]  # the copy: as it was
    assert query_read_only(w.reader, count)["n"].tolist() == [LIMIT + 1]
    assert query_read_only(w.reader, f"{count} AT (VERSION => {version})")["n"].tolist() == [LIMIT]
    assert cli.main(["snapshot", str(tmp_path / "then.duckdb"), "--version", str(version)]) == 0
    assert capsys.readouterr().out.strip().endswith(f"(DuckLake snapshot {version})")
    assert query_read_only(tmp_path / "then.duckdb", count)["n"].tolist() == [LIMIT]
    query = ANALYST_QUERIES[0]  # the views came along and read the same rows
    pd.testing.assert_frame_equal(
        query_read_only(tmp_path / "then.duckdb", query), query_read_only(w.file, query), check_dtype=False
    )
    assert not (tmp_path / "then.duckdb.partial").exists()


def test_the_cli_opens_the_lake_with_its_data_path(
    warehouses: Warehouses, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``themis cache`` (like compare and import) builds the warehouse resource with THEMIS_WAREHOUSE_DATA_PATH."""
    monkeypatch.setenv("THEMIS_WAREHOUSE", warehouses.lake)
    monkeypatch.setenv("THEMIS_WAREHOUSE_DATA_PATH", str(warehouses.data))
    assert cli.main(["cache", "stats"]) == 0
    out = capsys.readouterr().out
    assert MODEL in out or "(the request cache is empty)" in out, out
