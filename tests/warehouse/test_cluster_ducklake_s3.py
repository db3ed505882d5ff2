"""A DuckLake warehouse whose data path is an object store, offline: a local S3 (moto) and the session PostgreSQL.

One moto server and one lake (``s3://lake/data/``) for the module, credentials from the
standard AWS variables:
- the evaluation job (fake engine) writes its partitions as Parquet objects; the views and
  ``themis sql`` read them;
- two writer processes replacing their partitions at once leave every partition exactly its rows;
- the read-only door stays shut: test_sql_door's hostile statements, other buckets and prefixes
  (also through ``..``), writes into the lake's own prefix;
- the secret key is in no catalog row, object, Dagster event or error; an unreachable endpoint
  and missing credentials fail naming the setting.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import multiprocessing
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from deploy.local_stack import Postgres, free_port, postgres_bin, why_no_postgres
from tests.conftest import make_resources, requires_mirror, write_overrides
from tests.warehouse.test_cluster_ducklake import _items, _why_no_ducklake
from tests.warehouse.test_sql_door import _hostile
from themis_dagster import cli
from themis_dagster.resources import WarehouseResource
from themis_dagster.runs.reachability import UnreachableError
from themis_dagster.warehouse import ducklake
from themis_dagster.warehouse.partitions import replace_partition
from themis_dagster.warehouse.readonly import RefusedQuery, connect_read_only, run_read_only

boto3 = pytest.importorskip("boto3")
# The moto server runs in its own process, never imported here: it brings Flask, whose context
# proxies (flask.request, ...) raise on any attribute access outside a request, and vLLM's CPU
# platform, when an engine starts later in this process, scans every loaded module's attributes
# (triton_utils.dispatcher._rebind_kernels) and dies on them ("Working outside of application
# context"): every real-engine test after this module failed so in the full suite.
MOTO = importlib.util.find_spec("moto.server") is not None


def _why_no_httpfs() -> str | None:
    try:
        ducklake.extension_file("httpfs")
    except ducklake.WarehouseConfigError as error:
        return str(error)
    return None


pytestmark = [
    pytest.mark.cluster,
    requires_mirror,
    pytest.mark.skipif(why_no_postgres() is not None, reason=str(why_no_postgres())),
    pytest.mark.skipif(_why_no_ducklake() is not None, reason=str(_why_no_ducklake())),
    pytest.mark.skipif(_why_no_httpfs() is not None, reason=str(_why_no_httpfs())),
    pytest.mark.skipif(not MOTO, reason="moto[server] is not installed (requirements/cpu.txt)"),
]
MODEL = "smollm2-135m-instruct"
TASK = "crows_pairs"
LIMIT = 40  # enough rows that DuckLake writes Parquet objects (it inlines small inserts in the catalog)
KEY_ID = "AKIATHEMISTEST"
SECRET = "s3-secret-Zq8vW2pLx9"  # must appear nowhere but the environment
DATA = "s3://lake/data/"


@dataclasses.dataclass(frozen=True)
class S3Lake:
    warehouse: WarehouseResource
    catalog: Postgres
    endpoint: str
    s3: Any  # a boto3 S3 client on the moto server


def _objects(s3: Any) -> dict[str, str]:
    """Every object of every bucket, by s3:// URL, with its content's sha256."""
    found = {}
    for bucket in s3.list_buckets()["Buckets"]:
        for item in s3.list_objects_v2(Bucket=bucket["Name"]).get("Contents", []):
            body = s3.get_object(Bucket=bucket["Name"], Key=item["Key"])["Body"].read()
            found[f"s3://{bucket['Name']}/{item['Key']}"] = hashlib.sha256(body).hexdigest()
    return found


def _wait_for_port(port: int, server: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """Until the moto server accepts connections (it exits: fail at once)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the moto server exited with {server.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    server.kill()
    raise TimeoutError(f"the moto server did not listen on port {port} within {timeout_s} s")


@pytest.fixture(scope="module")
def s3lake(ducklake_postgres: Postgres) -> Iterator[S3Lake]:
    """The moto server, the AWS variables pointing at it, a catalog database ``s3lake`` and the lake, evaluated."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _wait_for_port(port, server)
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as env:
        for name, value in {
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": "eu-west-1",
            "AWS_ENDPOINT_URL": endpoint,
        }.items():
            env.setenv(name, value)
        env.delenv("AWS_ENDPOINT_URL_S3", raising=False)
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="eu-west-1")
        for bucket in ("lake", "other"):
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        s3.put_object(Bucket="other", Key="private/a.csv", Body=b"a\n1\n")
        s3.put_object(Bucket="lake", Key="outside/a.csv", Body=b"a\n2\n")
        psql = postgres_bin()
        assert psql is not None
        pg = ducklake_postgres
        subprocess.run(
            [str(psql / "psql"), "-h", pg.host, "-p", str(pg.port), "-U", pg.user, "-d", pg.dbname,
             "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE s3lake"],
            check=True, capture_output=True,
        )  # fmt: skip
        catalog = dataclasses.replace(pg, dbname="s3lake")
        warehouse = WarehouseResource(database=f"ducklake:postgres:{catalog.dsn}", data_path=DATA)
        try:
            yield S3Lake(warehouse, catalog, endpoint, s3)
        finally:
            server.terminate()
            server.wait(timeout=30)


@pytest.fixture(scope="module")
def evaluated(s3lake: S3Lake, tmp_path_factory: pytest.TempPathFactory) -> tuple[S3Lake, list[str]]:
    """The evaluation job once on the lake; returns the lake and the run's Dagster event texts."""
    from dagster import DagsterInstance

    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.settings import Settings

    root = tmp_path_factory.mktemp("s3-eval")
    resources = make_resources(
        root / "unused.duckdb", write_overrides(root / "overrides.yaml", {TASK: {"limit": LIMIT}})
    )
    resources["warehouse"] = s3lake.warehouse
    job = build_definitions(Settings(engine="fake")).resolve_job_def("evaluate")
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL])
        result = job.execute_in_process(
            instance=instance, resources=resources, partition_key=evaluation_key(MODEL, TASK)
        )
        assert result.success
        events = [str(entry) for entry in instance.all_logs(result.run_id)]
    return s3lake, events


def test_the_evaluation_writes_parquet_objects_and_the_views_and_themis_sql_read_them(
    evaluated: tuple[S3Lake, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lake, _ = evaluated
    objects = _objects(lake.s3)
    assert any(url.startswith(DATA) and url.endswith(".parquet") for url in objects), sorted(objects)
    with lake.warehouse.connect() as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM task_items WHERE model = ?), "
            "(SELECT count(DISTINCT item_id) FROM task_items WHERE model = ?), "
            "(SELECT count(*) FROM judgments WHERE model = ?)",
            [MODEL, MODEL, MODEL],
        ).fetchone()
        assert counts == (LIMIT, LIMIT, LIMIT)
        views = {row[0] for row in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        assert "metrics" in views
        for view in sorted(views):
            conn.execute(f'SELECT * FROM "{view}" LIMIT 1').fetchall()  # every analyst view runs on the object store
        assert conn.execute("SELECT count(*) FROM metric_values WHERE model = ?", [MODEL]).fetchone()[0] > 0
    monkeypatch.setenv("THEMIS_WAREHOUSE", lake.warehouse.database)
    code = cli.main(["sql", "SELECT count(*) AS n FROM task_items WHERE model = 'smollm2-135m-instruct'"])
    captured = capsys.readouterr()
    assert (code, captured.err, captured.out.split()) == (0, "", ["n", str(LIMIT)]), captured.err[:1500]


def _writer(database: str, data_path: str, model: str, rounds: int) -> None:
    lake = WarehouseResource(database=database, data_path=data_path)
    for version in range(rounds):
        with lake.connect() as conn:
            replace_partition(conn, "task_items", _items(model, "bbq", 40 + version, version), model, "bbq")


def test_two_writers_at_once_leave_every_partition_exactly_its_rows(evaluated: tuple[S3Lake, list[str]]) -> None:
    lake, _ = evaluated
    ctx = multiprocessing.get_context("spawn")
    models = ["w0", "w1"]
    workers = [ctx.Process(target=_writer, args=(lake.warehouse.database, DATA, m, 2)) for m in models]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [worker.exitcode for worker in workers] == [0, 0]
    with lake.warehouse.connect() as conn:
        rows = conn.execute(
            "SELECT model, count(*), count(DISTINCT item_id), min(subset), max(subset) FROM task_items "
            "WHERE task = 'bbq' AND model IN ('w0', 'w1') GROUP BY model ORDER BY model"
        ).fetchall()
    assert rows == [(m, 41, 41, "v1", "v1") for m in models]  # the last round's rows, none twice, none older


def _s3_escapes() -> list[str]:
    return [
        "SELECT * FROM read_csv('s3://other/private/a.csv')",
        "SELECT * FROM 's3://other/private/a.csv'",
        "SELECT * FROM read_csv('s3://lake/outside/a.csv')",
        "SELECT * FROM read_csv('s3://lake/data/../outside/a.csv')",
        "SELECT * FROM read_csv('s3://lake/data/../../other/private/a.csv')",
        "SELECT * FROM read_csv('s3://lake/data/' || '..' || '/outside/a.csv')",
        "SELECT * FROM 's3://lake/data/../outside/a.csv'",
        "SELECT * FROM glob('s3://lake/*')",
        "SELECT * FROM glob('s3://lake/data/*')",
        "SELECT * FROM read_blob('s3://lake/data/x')",
        f"COPY (SELECT 'x') TO '{DATA}planted.csv'",
        "COPY (SELECT 'x') TO 's3://other/planted.csv'",
        f"EXPORT DATABASE '{DATA}export'",
        "CREATE SECRET stolen (TYPE s3, KEY_ID 'a', SECRET 'b')",
        "SELECT * FROM duckdb_secrets()",  # allowed, and redacted: checked below
    ]


def test_the_door_stays_shut_on_an_object_store(evaluated: tuple[S3Lake, list[str]], tmp_path: Path) -> None:
    lake, _ = evaluated
    before = _objects(lake.s3)
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as conn:
        conn.execute("CREATE TABLE secrets AS SELECT 'kept' AS value")
    elsewhere = tmp_path / "out" / "stolen.csv"
    elsewhere.parent.mkdir()
    with connect_read_only(lake.warehouse.database) as conn:
        for query in [*_hostile(tmp_path / "w.duckdb", other, elsewhere), *_s3_escapes()[:-1]]:
            with pytest.raises(RefusedQuery):
                run_read_only(conn, query, lake=True)
        shown = run_read_only(conn, _s3_escapes()[-1], lake=True).to_string()
        assert SECRET not in shown and "secret=redacted" in shown
        # layer 1 alone: other buckets and prefixes are refused by allowed_directories, settings are locked
        for query in ("SELECT * FROM read_csv('s3://other/private/a.csv')", "SELECT * FROM read_csv('s3://lake/outside/a.csv')",
                      "COPY (SELECT 'x') TO 's3://other/x.csv'", "SELECT * FROM read_csv('/etc/passwd')"):  # fmt: skip
            with pytest.raises(duckdb.PermissionException):
                conn.execute(query)
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            conn.execute("SET allowed_directories = ['s3://']")
        assert run_read_only(conn, "SELECT count(*) AS n FROM judgments", lake=True)["n"].tolist()[0] > 0
    assert _objects(lake.s3) == before
    assert list(elsewhere.parent.iterdir()) == []


def test_the_secret_key_is_in_no_catalog_row_object_event_or_error(
    evaluated: tuple[S3Lake, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, events = evaluated
    assert events and not [e for e in events if SECRET in e]
    for url in _objects(lake.s3):
        bucket, key = url.removeprefix("s3://").split("/", 1)
        assert SECRET.encode() not in lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read(), url
    psql = postgres_bin()
    assert psql is not None
    pg = lake.catalog
    dump = subprocess.run(
        [str(psql / "pg_dump"), "-h", pg.host, "-p", str(pg.port), "-U", pg.user, pg.dbname],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert "ducklake_data_file" in dump and SECRET not in dump and KEY_ID not in dump
    settings = ducklake.s3_settings()
    assert SECRET not in repr(settings) and SECRET not in str(settings)
    with pytest.raises(ducklake.WarehouseConfigError) as refused:  # DuckDB's message quoting the statement is withheld
        ducklake.open_object_store(_Refusing(), settings)  # type: ignore[arg-type]
    assert SECRET not in str(refused.value) and refused.value.__cause__ is None


class _Refusing:
    """A connection whose CREATE SECRET fails with a message quoting the statement, as a parser error does."""

    def execute(self, statement: str) -> None:
        if "SECRET" in statement:
            raise duckdb.ParserException(f"syntax error at or near {statement}")


def test_an_unreachable_object_store_fails_naming_the_setting(s3lake: S3Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    nowhere = WarehouseResource(database=s3lake.warehouse.database, data_path=DATA)
    unreachable = r"^AWS_ENDPOINT_URL \(the DuckLake data path's object store\): cannot reach"
    with pytest.raises(UnreachableError, match=unreachable), nowhere.connect():
        pass
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "ftp://127.0.0.1")
    with pytest.raises(ducklake.WarehouseConfigError, match="AWS_ENDPOINT_URL_S3"):
        ducklake.s3_settings()


def test_missing_or_malformed_settings_are_named() -> None:
    env = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
    assert ducklake.s3_settings(env).region == ducklake.DEFAULT_REGION
    assert ducklake.s3_settings({**env, "AWS_DEFAULT_REGION": "eu-west-3"}).region == "eu-west-3"
    custom = ducklake.s3_settings({**env, "AWS_ENDPOINT_URL": "https://minio.example:9000"})
    assert (custom.endpoint, custom.use_ssl) == ("minio.example:9000", True)
    assert ducklake.object_store_endpoint(DATA, custom) == ("AWS_ENDPOINT_URL", "minio.example", 9000)
    aws = ducklake.s3_settings(env)
    assert ducklake.object_store_endpoint(DATA, aws) == (
        "THEMIS_WAREHOUSE_DATA_PATH", "lake.s3.us-east-1.amazonaws.com", 443
    )  # fmt: skip
    with pytest.raises(ducklake.WarehouseConfigError, match="AWS_SECRET_ACCESS_KEY is not set"):
        ducklake.s3_settings({"AWS_ACCESS_KEY_ID": KEY_ID})
    with pytest.raises(ducklake.WarehouseConfigError, match="AWS_REGION holds"):
        ducklake.s3_settings({**env, "AWS_REGION": "eu' OR 1"})
    with pytest.raises(ducklake.WarehouseConfigError, match="THEMIS_WAREHOUSE_DATA_PATH='gs://b/'"):
        ducklake.is_object_store("gs://b/")
    assert ducklake.is_object_store(DATA) and not ducklake.is_object_store("/srv/lake")


def test_snapshot_copies_the_object_store_lake_to_a_file(
    evaluated: tuple[S3Lake, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake, _ = evaluated
    monkeypatch.setenv("THEMIS_WAREHOUSE", lake.warehouse.database)
    copy = tmp_path / "copy.duckdb"
    assert cli.main(["snapshot", str(copy)]) == 0
    assert capsys.readouterr().out.strip().startswith(f"{copy} (DuckLake snapshot ")
    with duckdb.connect(str(copy), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM task_items WHERE model = ?", [MODEL]).fetchone() == (LIMIT,)
        assert conn.execute("SELECT count(*) FROM metrics WHERE model = ?", [MODEL]).fetchone()[0] > 0
