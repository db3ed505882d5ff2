"""``themis sql`` reads the warehouse and nothing else: writes, files, other databases and extensions are refused."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from themis_dagster import cli
from themis_dagster.warehouse.readonly import RefusedQuery, checked_statements, connect_read_only, query_read_only
from themis_dagster.warehouse.schema import ensure_schema


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A warehouse made by the project's schema code, with a few rows behind the views."""
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        conn.execute(
            "INSERT INTO metric_values VALUES "
            "('m', 'crows_pairs', NULL, 'pct_stereotype', 0.6, 0.5, 0.7, 10, now(), 'r1'), "
            "('m', 'crows_pairs', 'age', 'pct_stereotype', 0.8, 0.6, 0.9, 5, now(), 'r1')"
        )
        conn.execute("INSERT INTO metric_history SELECT * FROM metric_values")
        conn.execute(
            "INSERT INTO prompts (model, task, request_id, item_id, request_type, context, continuation) "
            "VALUES ('m', 'crows_pairs', 'q1', 'i1', 'loglikelihood', 'ctx', 'cont')"
        )
        conn.execute(
            "INSERT INTO responses (model, task, request_id, item_id, request_type, logprob, text) "
            "VALUES ('m', 'crows_pairs', 'q1', 'i1', 'loglikelihood', -1.5, 'reply')"
        )
        conn.execute(
            "INSERT INTO judgments VALUES "
            "('m', 'crows_pairs', 'i1', 'age', 'stereotype', 1.0, true, '{\"why\": \"more likely\"}', NULL), "
            "('m', 'crows_pairs', 'i2', 'age', 'unparsed', NULL, false, NULL, NULL)"
        )
        conn.execute("INSERT INTO leaderboard VALUES ('bbq', 'bias', 1, 'm', 0.1, 0.0, 0.2, 10, 0.0, now())")
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(path))
    return path


@pytest.fixture
def other(tmp_path: Path) -> Path:
    """Another database, which the door must not reach."""
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE secrets AS SELECT 'kept' AS value")
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sql(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["sql", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _hostile(warehouse: Path, other: Path, elsewhere: Path) -> list[str]:
    return [
        f"COPY (SELECT 'x') TO '{warehouse}'",
        f"COPY (SELECT 'x') TO '{warehouse}' (USE_TMP_FILE false)",
        f"COPY (SELECT 'x') TO '{elsewhere}'",
        f"COPY judgments TO '{elsewhere}' (FORMAT parquet)",
        f"COPY judgments FROM '{elsewhere}'",
        f"ATTACH '{other}' AS o (READ_ONLY false); DELETE FROM o.secrets",
        f"ATTACH '{other}' AS o",
        "INSERT INTO judgments VALUES ('m', 't', 'x', NULL, 'x', 1.0, true, NULL)",
        "UPDATE judgments SET score = 0",
        "DELETE FROM judgments",
        "CREATE TABLE t AS SELECT 1",
        "CREATE TEMP TABLE t AS SELECT 1",
        "CREATE VIEW v AS SELECT 1",
        "CREATE MACRO f() AS 1",
        "DROP TABLE judgments",
        "DROP VIEW metrics",
        "ALTER TABLE judgments ADD COLUMN z INTEGER",
        "INSTALL httpfs",
        "LOAD httpfs",
        "INSTALL json",
        "UPDATE EXTENSIONS",
        f"EXPORT DATABASE '{elsewhere}'",
        f"IMPORT DATABASE '{elsewhere}'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM glob('/*')",
        f"SELECT * FROM read_blob('{warehouse}')",
        f"SELECT * FROM read_parquet('{elsewhere}')",
        f"SET enable_external_access = true; COPY (SELECT 'x') TO '{warehouse}'",
        "SET enable_external_access = true",
        "RESET enable_external_access",
        "SET lock_configuration = false",
        "SET disabled_filesystems = ''",
        f"SELECT 1; COPY (SELECT 'x') TO '{warehouse}'",
        f"SELECT 1; ATTACH '{other}' AS o",
        f"EXPLAIN ANALYZE COPY (SELECT 'x') TO '{elsewhere}'",
        f"EXPLAIN COPY (SELECT 'x') TO '{elsewhere}'",
        "CALL pragma_database_size()",
        "CHECKPOINT",
        "VACUUM",
        "BEGIN TRANSACTION",
        "PREPARE p AS SELECT 1",
        "PRAGMA enable_profiling",
        "USE memory",
        "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
        "PIVOT judgments ON outcome USING count(*)",
    ]


def test_hostile_statements_are_refused_and_change_nothing(
    warehouse: Path, other: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "out" / "stolen.csv"
    elsewhere.parent.mkdir()
    before = {path: _digest(path) for path in (warehouse, other)}
    for query in _hostile(warehouse, other, elsewhere):
        code, out, err = _sql(capsys, query)
        assert code == 2, (query, out, err)
        assert out == ""
        assert err.startswith("themis sql: refused"), (query, err)
        assert "only reads" in err or "outside the warehouse" in err, (query, err)
    assert {path: _digest(path) for path in (warehouse, other)} == before
    assert list(elsewhere.parent.iterdir()) == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["other.duckdb", "out", "warehouse.duckdb"]
    with duckdb.connect(str(other), read_only=True) as conn:
        assert conn.execute("SELECT value FROM secrets").fetchall() == [("kept",)]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("INSERT INTO judgments SELECT * FROM judgments", "refused INSERT statement"),
        ("DELETE FROM judgments", "refused DELETE statement 'DELETE FROM judgments': it deletes rows"),
        ("COPY (SELECT 1) TO 'x.csv'", "refused COPY statement"),
        ("ATTACH 'x.duckdb'", "refused ATTACH statement"),
        ("INSTALL httpfs", "refused LOAD statement 'INSTALL httpfs': it installs or loads an extension"),
        ("EXPORT DATABASE 'x'", "refused EXPORT statement"),
        ("SET enable_external_access = true", "refused SET statement"),
        ("SELECT 1; DROP TABLE judgments", "refused DROP statement"),
        ("UPDATE EXTENSIONS", "refused statement type 29 statement"),
        ("CALL pragma_database_size()", "use SELECT * FROM function(...) instead"),
        ("PIVOT judgments ON outcome USING count(*)", "PIVOT ... ON col IN (...)"),
        ("EXPLAIN ANALYZE DELETE FROM judgments", "only EXPLAIN of a SELECT"),
        ("SELECT * FROM read_csv('/etc/passwd')", "outside the warehouse"),
        ("", "no statement"),
        ("  ; -- nothing", "no statement"),
    ],
)
def test_refusals_name_the_statement_and_why(warehouse: Path, query: str, named: str) -> None:
    with pytest.raises(RefusedQuery) as refused:
        query_read_only(warehouse, query)
    assert named in str(refused.value)


def test_the_connection_itself_is_locked_down(warehouse: Path, other: Path, tmp_path: Path) -> None:
    """Without the statement check, DuckDB's configuration alone still refuses the escapes."""
    before = {path: _digest(path) for path in (warehouse, other)}
    with connect_read_only(warehouse) as conn:
        for query in (
            f"COPY (SELECT 'x') TO '{warehouse}'",
            f"COPY (SELECT 'x') TO '{warehouse}' (USE_TMP_FILE false)",  # the warehouse path is allowed_paths
            f"COPY (SELECT 'x') TO '{warehouse}.wal' (USE_TMP_FILE false)",
            f"SELECT * FROM read_blob('{warehouse}')",
            f"COPY (SELECT 'x') TO '{tmp_path / 'x.csv'}'",
            f"ATTACH '{other}' AS o (READ_ONLY false)",
            "INSTALL httpfs",
            "LOAD httpfs",
            f"EXPORT DATABASE '{tmp_path / 'export'}'",
            "SELECT * FROM read_csv('/etc/passwd')",
        ):
            with pytest.raises(duckdb.PermissionException):
                conn.execute(query)
        for query in (
            "SET enable_external_access = true",
            "RESET enable_external_access",
            "SET disabled_filesystems = ''",
            "SET lock_configuration = false",
        ):
            with pytest.raises(duckdb.InvalidInputException, match="locked"):
                conn.execute(query)
        with pytest.raises(duckdb.Error, match="read-only"):
            conn.execute("DELETE FROM judgments")
        assert conn.execute("SELECT current_setting('enable_external_access')").fetchone() == (False,)
        # Parsing happens on this connection: IMPORT DATABASE reads files while being parsed.
        with pytest.raises(RefusedQuery, match="outside the warehouse"):
            checked_statements(conn, f"IMPORT DATABASE '{tmp_path}'")
    assert {path: _digest(path) for path in (warehouse, other)} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["other.duckdb", "warehouse.duckdb"]


def test_readme_queries_work(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _digest(warehouse)
    for query in (
        "SELECT model, task, metric, value, ci_low, ci_high, n FROM metrics WHERE subset IS NULL",
        "SELECT subset, round(value, 3) AS pct, n FROM metrics WHERE task = 'crows_pairs' "
        "AND metric = 'pct_stereotype' AND subset IS NOT NULL ORDER BY value DESC",
        "SELECT item_id, outcome, continuation, logprob FROM metric_drilldown WHERE task = 'crows_pairs' "
        "AND metric = 'pct_stereotype' AND metric_subset = 'age' LIMIT 10",
        "SELECT task, outcome, text FROM parse_failures WHERE model = 'm' LIMIT 20",
        "SELECT model, task, metric, value, change_since_previous, materialized_at FROM metric_trend "
        "WHERE subset IS NULL",
        "SELECT * FROM leaderboard_view WHERE task = 'bbq'",
        "SELECT * FROM parse_rates",
    ):
        code, out, err = _sql(capsys, query)
        assert (code, err) == (0, ""), query
        assert out.strip() and "Empty DataFrame" not in out, query
    assert _digest(warehouse) == before


def test_read_statements_and_formats(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _sql(capsys, "--format", "csv", "SELECT item_id, detail->>'why' AS why FROM judgments ORDER BY 1")
    assert code == 0
    assert out.strip().splitlines() == ["item_id,why", "i1,more likely", "i2,"]
    code, out, _ = _sql(capsys, "--format", "csv", "SELECT 1 AS a; SELECT 2 AS b")  # several reads: the last result
    assert (code, out.strip().splitlines()) == (0, ["b", "2"])
    for query in (
        "DESCRIBE judgments",
        "SHOW TABLES",
        "SUMMARIZE judgments",
        "FROM judgments",
        "EXPLAIN SELECT * FROM metrics",
        "/* plan */ EXPLAIN (FORMAT json) SELECT 1",
        "PRAGMA database_list",
        "SELECT * FROM pragma_database_size()",
        "PIVOT judgments ON outcome IN ('stereotype', 'unparsed') USING count(*) GROUP BY model",
        "WITH t AS (SELECT * FROM judgments) SELECT count(*) FROM t",
        "SELECT json_extract(detail, '$.why') FROM judgments",
    ):
        code, out, err = _sql(capsys, query)
        assert (code, err) == (0, ""), (query, err)
    code, _, err = _sql(capsys, "SELECT * FROM no_such_table")
    assert code == 1 and "no_such_table" in err
    code, out, err = _sql(capsys, "SELECT * FROM '/etc/passwd'")  # no replacement scans of files either
    assert code == 1 and out == "" and "root:" not in err


def _hold_for_writing(path: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time\n"
            "conn = duckdb.connect(sys.argv[1])\n"
            "print('held', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n"
            "conn.close()\n",
            str(path),
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_waits_while_a_run_writes(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    holder = _hold_for_writing(warehouse, 2.0)
    try:
        started = time.monotonic()
        code, out, err = _sql(capsys, "--wait", "60", "SELECT count(*) AS n FROM judgments")
        assert (code, err) == (0, "")
        assert out.split() == ["n", "2"]
        assert time.monotonic() - started > 1.0  # it waited for the writer (2 s) instead of failing at once
    finally:
        holder.kill()
        holder.wait()


def test_gives_up_with_a_clear_message_when_the_writer_stays(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = _hold_for_writing(warehouse, 120.0)
    try:
        code, out, err = _sql(capsys, "--wait", "0.5", "SELECT 1")
        assert (code, out) == (2, "")
        assert "locked for writing" in err and "stayed locked for 0.5 s" in err and "themis snapshot" in err
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM \"POSTGRES_QUERY\"('db', 'SELECT 1')",
        "FROM main.postgres_query('db', 'SELECT 1')",
        "WITH x AS (FROM postgres_query('db', 'SELECT 1')) FROM x",
        "SELECT 1 ORDER BY (SELECT 1 FROM postgres_query('db', 'SELECT 1'))",
        "SELECT 1 WHERE EXISTS (FROM postgres_execute('db', 'DROP TABLE t'))",
        "SUMMARIZE FROM postgres_query('db', 'SELECT 1')",
        "DESCRIBE SELECT * FROM postgres_scan('db', 'public', 't')",
        "PIVOT (FROM postgres_query('db', 'SELECT 1')) ON x IN (1) USING count(*)",
        "EXPLAIN SELECT * FROM postgres_query('db', 'SELECT 1')",
        "SELECT * FROM query('SELECT 1')",
        "SELECT json_execute_serialized_sql('{}')",
        "SELECT * FROM ducklake_cleanup_old_files('themis_lake', cleanup_all => true)",
        "SELECT * FROM ducklake_expire_snapshots('themis_lake', older_than => now())",
    ],
)
def test_reads_on_a_lake_may_not_call_functions_that_reach_past_it(query: str) -> None:
    """On a DuckLake warehouse the locked connection still runs these: the statement check refuses them."""
    with duckdb.connect() as conn, pytest.raises(RefusedQuery, match=r"it calls \w+\(\)"):
        checked_statements(conn, query, lake=True)
    with duckdb.connect() as conn:  # the lake's read-only functions and plain reads pass
        for read in ("SELECT * FROM ducklake_snapshots('themis_lake')", "SELECT lower('A'), count(*) FROM range(3)"):
            checked_statements(conn, read, lake=True)


@pytest.mark.parametrize(
    ("target", "named"),
    [
        ("ducklake:postgres:dbname=lake host=127.0.0.1 port={port}", r"THEMIS_WAREHOUSE \(the DuckLake catalog\)"),
        ("ducklake:postgres:host=127.0.0.1", "THEMIS_WAREHOUSE: the catalog needs dbname="),
        ("ducklake:sqlite:lake.db", "only a PostgreSQL catalog"),
    ],
)
def test_a_bad_lake_setting_is_named_before_anything_runs(
    target: str, named: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from deploy.local_stack import free_port

    monkeypatch.setenv("THEMIS_WAREHOUSE", target.format(port=free_port()))
    for command in (["sql", "SELECT 1"], ["snapshot", "unused.duckdb"]):
        assert cli.main(command) == 2
        err = capsys.readouterr().err
        assert err.startswith("themis: configuration error:") and re.search(named, err), err


def test_snapshot_versions_are_the_lakes_only(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["snapshot", str(warehouse.with_name("copy.duckdb")), "--version", "3"]) == 2
    assert "only a DuckLake warehouse has snapshot versions" in capsys.readouterr().err
    assert not warehouse.with_name("copy.duckdb").exists()
