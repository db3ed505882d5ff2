"""A DuckLake warehouse: many writer processes and hosts, a PostgreSQL catalog, data files in a folder or object store.

``THEMIS_WAREHOUSE=ducklake:postgres:dbname=themis host=db.example user=themis`` selects it,
``THEMIS_WAREHOUSE_DATA_PATH`` is where its Parquet files go (a shared folder, or an object
store URL that DuckDB can write). The extensions come from PyPI packages
(``duckdb-extension-ducklake``, ``duckdb-extension-postgres_scanner`` 1.5.5, which load only
into duckdb 1.5.5) and are loaded from their files: nothing is downloaded at run time.

On an object store (``THEMIS_WAREHOUSE_DATA_PATH=s3://bucket/prefix/``) ``httpfs`` is loaded
too (``duckdb-extension-httpfs``) and a temporary DuckDB secret is made from the standard AWS
variables (:func:`s3_settings`): DuckDB's ``credential_chain`` provider would need the ``aws``
extension, which PyPI does not ship. The secret lives in the connection's memory only; DuckDB
redacts it in ``duckdb_secrets()``, and an error while making it is re-raised without the statement.

DuckLake differs from a DuckDB file in two ways the warehouse code relies on:
- no PRIMARY KEY/UNIQUE: tables are created without them (``ensure_schema(constraints=False)``);
  keys stay unique by construction (a partition's rows are deleted and inserted in one
  transaction; append-only tables insert only keys not yet present), checked by the tests;
- conflicts are detected at commit, per table: two writers that delete from the same table
  conflict ("Transaction conflict"), even on different partitions. The losing writer's
  transaction is rolled back whole (its partition keeps its previous rows) and retried here a
  bounded number of times; a commit still conflicting after them fails naming the table.
"""

from __future__ import annotations

import importlib.util
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import duckdb

PREFIX = "ducklake:"
CATALOG_ALIAS = "themis_lake"
EXTENSION_PACKAGES = {"ducklake": "duckdb_extension_ducklake", "postgres_scanner": "duckdb_extension_postgres_scanner"}
OBJECT_STORE_PACKAGES = {"httpfs": "duckdb_extension_httpfs"}  # loaded when the data path is a URL
OBJECT_STORE_SCHEMES = ("s3://",)
SECRET_NAME = "themis_lake_s3"  # noqa: S105 - the name DuckDB knows it by
# The standard variables, first one set wins (AWS_ENDPOINT_URL_S3 is the AWS SDKs' per-service override).
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
DEFAULT_REGION = "us-east-1"
# DuckLake's ATTACH of a catalog whose data path is a URL, before httpfs is loaded (DuckDB 1.5.5).
NEEDS_HTTPFS = "requires the extension httpfs to be loaded"
CONFLICT = "Transaction conflict"
INIT_RACE = "Failed to initialize DuckLake"
DEFAULT_COMMIT_ATTEMPTS = 12

T = TypeVar("T")


class WarehouseConfigError(ValueError):
    """A DuckLake setting is missing or malformed; the message names it."""


class CommitConflictError(RuntimeError):
    """A write still conflicted with other writers after every retry; nothing of it was kept."""


def is_ducklake(target: str) -> bool:
    """Whether a ``THEMIS_WAREHOUSE`` value names a DuckLake database (else: a DuckDB file)."""
    return target.startswith(PREFIX)


def catalog_dsn(target: str) -> str:
    """The libpq key=value string of a ``ducklake:postgres:...`` target."""
    rest = target.removeprefix(PREFIX)
    if not rest.startswith("postgres:"):
        raise WarehouseConfigError(f"THEMIS_WAREHOUSE={target!r}: only a PostgreSQL catalog (ducklake:postgres:...)")
    dsn = rest.removeprefix("postgres:")
    if "dbname=" not in dsn:
        raise WarehouseConfigError("THEMIS_WAREHOUSE: the catalog needs dbname=... (ducklake:postgres:dbname=...)")
    return dsn


def catalog_endpoint(dsn: str) -> tuple[str, int]:
    """Host and port named by a libpq key=value string (libpq's defaults where absent)."""
    fields = dict(part.split("=", 1) for part in dsn.split() if "=" in part)
    return fields.get("host", "localhost"), int(fields.get("port", "5432"))


def extension_file(name: str) -> Path:
    """The extension binary shipped by its PyPI package, for this duckdb version."""
    package = {**EXTENSION_PACKAGES, **OBJECT_STORE_PACKAGES}[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise WarehouseConfigError(f"THEMIS_WAREHOUSE names DuckLake but the {package} package is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "extensions" / f"v{duckdb.__version__}"
    candidate = folder / f"{name}.duckdb_extension"
    if not candidate.is_file():
        raise WarehouseConfigError(
            f"{package} has no build for duckdb {duckdb.__version__} (looked for {candidate}); pin both to one version"
        )
    return candidate


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def is_object_store(data_path: str) -> bool:
    """Whether a data path is an object store URL (else: a folder); other schemes are refused."""
    if data_path.startswith(OBJECT_STORE_SCHEMES):
        return True
    if "://" in data_path:
        raise WarehouseConfigError(
            f"THEMIS_WAREHOUSE_DATA_PATH={data_path!r}: a folder or an s3://bucket/prefix/ URL (S3 or S3-compatible)"
        )
    return False


@dataclass(frozen=True)
class S3Settings:
    """What the DuckDB S3 secret is made of; ``repr`` never shows the secret key."""

    key_id: str
    secret: str
    region: str
    session_token: str
    endpoint: str  # host:port of an S3-compatible store, "" for AWS itself
    use_ssl: bool
    endpoint_setting: str  # the variable the endpoint came from, for error messages

    def __repr__(self) -> str:
        return f"S3Settings(key_id={self.key_id!r}, region={self.region!r}, endpoint={self.endpoint!r}, secret=***)"


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str]:
    for name in names:
        if env.get(name):
            return name, env[name]
    return names[0], ""


def s3_settings(env: Mapping[str, str] | None = None) -> S3Settings:
    """The S3 credentials from the standard AWS variables; a missing or malformed one is named.

    AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys),
    AWS_REGION or AWS_DEFAULT_REGION, and for an S3-compatible store AWS_ENDPOINT_URL_S3 or
    AWS_ENDPOINT_URL (``http://host:port``: path-style requests, TLS only for https).
    """
    env = os.environ if env is None else env
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        if not env.get(name):
            raise WarehouseConfigError(f"{name} is not set: an s3:// THEMIS_WAREHOUSE_DATA_PATH needs S3 credentials")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", *REGION_VARIABLES):
        if any(ch.isspace() or ch in "'\\" for ch in env.get(name, "")):
            raise WarehouseConfigError(f"{name} holds whitespace, a quote or a backslash: not a valid S3 setting")
    _, region = _first(env, REGION_VARIABLES)
    endpoint_setting, url = _first(env, ENDPOINT_VARIABLES)
    endpoint, use_ssl = "", True
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
            raise WarehouseConfigError(f"{endpoint_setting}={url!r}: expected http(s)://host[:port]")
        endpoint, use_ssl = parts.netloc.rsplit("@", 1)[-1], parts.scheme == "https"
    return S3Settings(
        key_id=env["AWS_ACCESS_KEY_ID"],
        secret=env["AWS_SECRET_ACCESS_KEY"],
        region=region or DEFAULT_REGION,
        session_token=env.get("AWS_SESSION_TOKEN", ""),
        endpoint=endpoint,
        use_ssl=use_ssl,
        endpoint_setting=endpoint_setting,
    )


def object_store_endpoint(data_path: str, s3: S3Settings) -> tuple[str, str, int]:
    """The setting to name, host and port an object-store data path is reached at (for the reachability check)."""
    if s3.endpoint:
        parts = urlsplit(f"//{s3.endpoint}")
        return s3.endpoint_setting, parts.hostname or "", parts.port or (443 if s3.use_ssl else 80)
    bucket = urlsplit(data_path).hostname or ""
    return "THEMIS_WAREHOUSE_DATA_PATH", f"{bucket}.s3.{s3.region}.amazonaws.com", 443


def open_object_store(conn: duckdb.DuckDBPyConnection, s3: S3Settings) -> None:
    """Load httpfs from its package and make the connection's temporary S3 secret.

    CREATE SECRET takes no bound parameters: the values are checked by :func:`s3_settings` and
    quoted as literals; if DuckDB refuses the statement, its message (which may quote the
    statement) is not passed on.
    """
    conn.execute(f"LOAD {_literal(str(extension_file('httpfs')))}")
    options = [
        "TYPE s3",
        f"KEY_ID {_literal(s3.key_id)}",
        f"SECRET {_literal(s3.secret)}",
        f"REGION {_literal(s3.region)}",
    ]
    if s3.session_token:
        options.append(f"SESSION_TOKEN {_literal(s3.session_token)}")
    if s3.endpoint:
        options += [f"ENDPOINT {_literal(s3.endpoint)}", "URL_STYLE 'path'", f"USE_SSL {str(s3.use_ssl).lower()}"]
    try:
        conn.execute(f"CREATE OR REPLACE TEMPORARY SECRET {SECRET_NAME} ({', '.join(options)})")
    except duckdb.Error as error:
        raise WarehouseConfigError(
            f"the S3 settings (AWS_*) were refused by DuckDB ({type(error).__name__}; "
            "its message is withheld: it may quote them)"
        ) from None


def connect(target: str, data_path: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the DuckLake database attached and in use; extensions from their packages.

    An ``s3://`` data path loads httpfs and makes the S3 secret first (:func:`open_object_store`).

    ATTACH takes no bound parameters: the DSN and path (settings, never user input) are
    quoted as literals.
    """
    dsn = catalog_dsn(target)
    if not data_path:
        raise WarehouseConfigError("THEMIS_WAREHOUSE_DATA_PATH is empty: a DuckLake warehouse needs a data folder")
    object_store = is_object_store(data_path)
    s3 = s3_settings() if object_store else None
    conn = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        for name in EXTENSION_PACKAGES:
            conn.execute(f"LOAD {_literal(str(extension_file(name)))}")
        if s3 is not None:
            open_object_store(conn, s3)
        else:
            Path(data_path).mkdir(parents=True, exist_ok=True)
        attach_with_init_retries(
            conn, f"ATTACH {_literal(PREFIX + 'postgres:' + dsn)} AS {CATALOG_ALIAS} (DATA_PATH {_literal(data_path)})"
        )
        conn.execute(f"USE {CATALOG_ALIAS}")
    except BaseException:
        conn.close()
        raise
    return conn


def attach_existing(conn: duckdb.DuckDBPyConnection, attach: str) -> None:
    """ATTACH a lake whose data path only the catalog knows (readers); on an object store, httpfs and the secret first.

    DuckLake asks for httpfs when the recorded data path is a URL; then the object store is opened
    (:func:`open_object_store`) and the ATTACH run again.
    """
    try:
        conn.execute(attach)
    except duckdb.Error as error:
        if NEEDS_HTTPFS not in str(error):
            raise
        open_object_store(conn, s3_settings())
        conn.execute(attach)


def attach_with_init_retries(conn: duckdb.DuckDBPyConnection, attach: str, attempts: int = 6) -> None:
    """ATTACH the DuckLake catalog; when another process is creating a new catalog at that moment, attach again.

    The first ATTACH of an empty catalog creates DuckLake's metadata tables. Two runs that
    start together on a new warehouse both try, and the loser fails with "Failed to initialize
    DuckLake" (PostgreSQL: the table already exists); once the winner has committed, the
    catalog is there and the next ATTACH reads it. Seen in the Ray test: one of four runs failed so.
    """
    for attempt in range(1, attempts + 1):
        try:
            conn.execute(attach)
            return
        except duckdb.Error as error:
            if INIT_RACE not in str(error) or attempt == attempts:
                raise
            time.sleep(0.2 * attempt * (0.5 + random.random()))  # noqa: S311 - jitter


def is_conflict(error: BaseException) -> bool:
    return isinstance(error, duckdb.Error) and CONFLICT in str(error)


def with_commit_retries(
    write: Callable[[], T], what: str, attempts: int = DEFAULT_COMMIT_ATTEMPTS, base_delay_s: float = 0.05
) -> T:
    """Run ``write`` (one whole transaction that rolls itself back on failure) until it commits.

    Only DuckLake's "Transaction conflict" is retried, after a jittered, growing pause; any
    other error, and a conflict after ``attempts`` tries, is raised. The transaction is
    rolled back each time, so the partition keeps its previous rows until a try commits.
    """
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except duckdb.Error as error:
            if not is_conflict(error):
                raise
            if attempt == attempts:
                raise CommitConflictError(
                    f"{what}: still conflicting with other writers after {attempts} commits; "
                    f"its previous rows are kept ({error})"
                ) from error
            time.sleep(base_delay_s * 2 ** min(attempt, 6) * (0.5 + random.random()))  # noqa: S311 - jitter
    raise AssertionError("unreachable")
