"""The read-only SQL door (``themis sql``): queries that can read the warehouse and nothing else.

A read-only DuckDB connection is not a sandbox: it still runs ``COPY ... TO``, ``ATTACH``
(read-write) of other databases, ``INSTALL``/``LOAD``, ``EXPORT DATABASE`` and file readers
such as ``read_csv('/etc/passwd')``. Two layers close the door:

1. DuckDB's own configuration (:func:`connect_read_only`). At connect time
   (:data:`READ_ONLY_CONFIG`), ``enable_external_access = false`` refuses files other than
   the warehouse's own (COPY TO/FROM, ATTACH, EXPORT/IMPORT DATABASE, INSTALL, LOAD of
   extension files, read_csv/read_text/glob...) and no extension is installed or loaded on
   demand. That setting still allows the warehouse's own path (DuckDB 1.5 lists it in
   ``allowed_paths``), and ``COPY ... TO '<warehouse>' (USE_TMP_FILE false)`` overwrites it;
   so once the file is open, ``disabled_filesystems = 'LocalFileSystem'`` refuses every
   local file through SQL (reads of the open database go through its open handle and keep
   working), and ``lock_configuration = true`` keeps any statement from undoing it. The
   extensions the views need (json, icu, parquet) are statically linked and already loaded.
2. Each statement is classified by DuckDB's parser (on that locked connection, so even
   parsing cannot read a file) and only reads are run: SELECT (which covers FROM-first
   queries, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE and read-only PRAGMAs) and EXPLAIN of a
   SELECT. Anything else is refused, naming the statement and why, before anything runs.

Opening waits briefly while a run holds the warehouse for writing (:func:`connect_read_only`).

A DuckLake warehouse (``THEMIS_WAREHOUSE=ducklake:postgres:...``) needs its extensions, its
PostgreSQL catalog and its Parquet files, so layer 1 differs (:func:`connect_lake_read_only`):
the extensions are loaded from their packages' files and the lake is attached ``READ_ONLY``
(DuckLake then opens its catalog in PostgreSQL ``READ ONLY`` transactions), then
``allowed_directories`` is set to the lake's data folder alone, ``enable_external_access =
false`` and ``lock_configuration = true``. That leaves two openings layer 2 must close: files
under the data folder can be written (``COPY ... TO``; refused as a statement) and the
PostgreSQL extension's ``postgres_query`` runs any read-only SQL on the catalog server as the
catalog's role (``pg_read_file`` for a superuser); so on a lake, a read also may not call
``postgres_*`` functions, DuckLake's maintenance functions or the SQL-from-a-string functions
(``query``, ``json_execute_serialized_sql``) (:data:`LAKE_FORBIDDEN_FUNCTIONS`), nor read files or URLs
(file readers such as ``read_csv``, ``glob``, ``FROM 'path'``: :data:`LAKE_TABLE_FUNCTIONS`). On an
``s3://`` data path ``allowed_directories`` holds the lake's URL prefix, which keeps other buckets
and prefixes out, except through ``..`` segments (DuckDB 1.5.5 tests the URL as text, before the
request resolves them); the file-reader refusal closes that. Give analysts
a catalog role that may only SELECT (docs/scale-out.md) so PostgreSQL refuses the rest too.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from themis_dagster.runs.reachability import check_reachable
from themis_dagster.warehouse import ducklake

if TYPE_CHECKING:
    import pandas as pd

# Set at connect time, before any statement runs.
READ_ONLY_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
}
# Set once the warehouse is open (DuckDB refuses disabled_filesystems before), the lock last.
AFTER_OPEN = ("SET disabled_filesystems = 'LocalFileSystem'", "SET lock_configuration = true")

DEFAULT_WAIT_S = 10.0

# DuckLake's table functions that only read; its others (expire, cleanup, merge, flush...) maintain the lake.
LAKE_READ_FUNCTIONS = frozenset(
    {
        "ducklake_snapshots",
        "ducklake_current_snapshot",
        "ducklake_last_committed_snapshot",
        "ducklake_table_info",
        "ducklake_list_files",
        "ducklake_table_changes",
        "ducklake_table_insertions",
        "ducklake_table_deletions",
        "ducklake_options",
        "ducklake_settings",
    }
)
# Functions a read on a lake may not call: SQL run elsewhere or hidden in a string.
LAKE_FORBIDDEN_FUNCTIONS = frozenset({"query", "query_table", "json_execute_serialized_sql"})
LAKE_FORBIDDEN_PREFIXES = ("postgres_", "ducklake_")
# The table functions a read on a lake may use in FROM: no file readers. On an s3:// data path,
# allowed_directories is a plain prefix test on the URL (DuckDB 1.5.5 checks 's3://b/data/../x'
# as inside 's3://b/data/' and then fetches s3://b/x), so file readers are refused by name.
LAKE_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "repeat", "json_each", "json_tree"})
LAKE_TABLE_FUNCTION_PREFIXES = ("duckdb_", "pragma_", "ducklake_")  # catalog listings; ducklake_: checked above

_WHY: dict[str, str] = {
    "INSERT": "it writes rows",
    "UPDATE": "it writes rows",
    "DELETE": "it deletes rows",
    "MERGE_INTO": "it writes rows",
    "CREATE": "it creates objects",
    "CREATE_FUNC": "it creates objects",
    "DROP": "it drops objects",
    "ALTER": "it changes objects",
    "COPY": "it copies data to or from files",
    "COPY_DATABASE": "it copies a database",
    "EXPORT": "it writes the database to files",
    "ATTACH": "it opens another database",
    "DETACH": "it detaches a database",
    "LOAD": "it installs or loads an extension",
    "EXTENSION": "it manages extensions",
    "SET": "it changes settings (SET, RESET, USE)",
    "VARIABLE_SET": "it sets variables",
    "PRAGMA": "it runs a pragma that is not a read",
    "CALL": "it calls a function as a statement (use SELECT * FROM function(...) instead)",
    "TRANSACTION": "it controls transactions",
    "PREPARE": "it prepares statements",
    "EXECUTE": "it executes prepared statements",
    "VACUUM": "it rewrites storage",
    "ANALYZE": "it updates statistics",
}

# EXPLAIN [ANALYZE] [(options)] <statement>, after any leading comments.
_EXPLAIN = re.compile(
    r"(?:\s|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*EXPLAIN\s+(?:ANALY[SZ]E\s+)?(?:\([^()]*\)\s*)?(?P<inner>.*)\Z",
    re.IGNORECASE | re.DOTALL,
)


class RefusedQuery(ValueError):
    """A statement that ``themis sql`` does not run: it could write or reach outside the warehouse."""


class WarehouseBusy(TimeoutError):
    """The warehouse stayed locked for writing (by a run) longer than the wait allowed."""


def _name(statement_type: duckdb.StatementType) -> str:
    # Statement types newer than the Python enum are named "???" (e.g. UPDATE EXTENSIONS).
    name = str(statement_type.name)
    return name if name.isidentifier() else f"statement type {int(statement_type)}"


def _refuse(statement: duckdb.Statement, why: str) -> RefusedQuery:
    text = " ".join(statement.query.split())
    shown = text if len(text) <= 80 else text[:77] + "..."
    return RefusedQuery(
        f"refused {_name(statement.type)} statement{f' {shown!r}' if shown else ''}: {why}; "
        "themis sql only reads the warehouse (SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN SELECT)"
    )


def _outside(error: duckdb.PermissionException) -> RefusedQuery:
    said = " ".join(str(error).split())
    return RefusedQuery(
        "refused: the query reaches outside the warehouse (files through read_csv, read_text, glob, "
        f"COPY or a path in FROM; extensions); themis sql reads only its tables and views. DuckDB said: {said}"
    )


def _function_names(tree: object) -> set[str]:
    """Every function named anywhere in a serialized statement (``json_serialize_sql``)."""
    return {node["function_name"].lower() for node in _objects(tree) if isinstance(node.get("function_name"), str)}


def _objects(tree: object) -> Iterator[dict[str, Any]]:
    """Every JSON object (dict) anywhere in a serialized statement, depth first."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _file_references(tree: object) -> set[str]:
    """Table functions outside :data:`LAKE_TABLE_FUNCTIONS` and FROM-a-path names in a serialized statement."""
    found: set[str] = set()
    for node in _objects(tree):
        if node.get("type") == "TABLE_FUNCTION":
            name = str((node.get("function") or {}).get("function_name", "")).lower()
            if name not in LAKE_TABLE_FUNCTIONS and not name.startswith(LAKE_TABLE_FUNCTION_PREFIXES):
                found.add(f"{name}()")
        elif node.get("type") == "BASE_TABLE" and any(c in str(node.get("table_name", "")) for c in "/:\\"):
            found.add(repr(node["table_name"]))
    return found


def _check_lake_functions(conn: duckdb.DuckDBPyConnection, statement: duckdb.Statement, query: str) -> None:
    """Refuse a read that calls a function which reaches past the lake's tables (:data:`LAKE_FORBIDDEN_FUNCTIONS`)."""
    row = conn.execute("SELECT json_serialize_sql(?)", [query]).fetchone()
    tree = json.loads(row[0]) if row else {"error": True}
    if tree.get("error"):
        raise _refuse(statement, "it cannot be checked for functions that reach outside the warehouse")
    for name in sorted(_function_names(tree)):
        if name in LAKE_READ_FUNCTIONS:
            continue
        if name in LAKE_FORBIDDEN_FUNCTIONS or name.startswith(LAKE_FORBIDDEN_PREFIXES):
            raise _refuse(statement, f"it calls {name}(), which runs SQL elsewhere or maintains the lake")
    files = _file_references(tree)
    if files:
        raise _refuse(statement, f"it reads files or URLs ({', '.join(sorted(files))}); on a lake only tables are read")


def checked_statements(conn: duckdb.DuckDBPyConnection, sql: str, *, lake: bool = False) -> list[duckdb.Statement]:
    """The statements of ``sql``, each a read; raises :class:`RefusedQuery` if any is not.

    Parse on a connection from :func:`connect_read_only`: DuckDB's parser reads files
    for some statements (IMPORT DATABASE), which that configuration refuses. On a DuckLake
    warehouse (``lake``), the functions a read calls are checked too (the module's docstring).
    """
    try:
        statements = conn.extract_statements(sql)
    except duckdb.PermissionException as error:
        raise _outside(error) from error
    if not statements:
        raise RefusedQuery("refused: the query holds no statement")
    for statement in statements:
        if statement.type == duckdb.StatementType.SELECT:
            if lake:
                _check_lake_functions(conn, statement, statement.query)
            continue
        if statement.type == duckdb.StatementType.EXPLAIN:
            match = _EXPLAIN.match(statement.query)
            inner = conn.extract_statements(match["inner"]) if match else []
            if len(inner) == 1 and inner[0].type == duckdb.StatementType.SELECT:
                if lake:
                    _check_lake_functions(conn, statement, inner[0].query)
                continue
            raise _refuse(statement, "only EXPLAIN of a SELECT is run (EXPLAIN ANALYZE executes its statement)")
        why = _WHY.get(_name(statement.type), "it is not a read")
        if statement.type == duckdb.StatementType.CREATE and not statement.query.strip():
            why += " (a PIVOT without an IN list creates a type first: list the values, PIVOT ... ON col IN (...))"
        raise _refuse(statement, why)
    return statements


def _is_lock_conflict(error: duckdb.Error) -> bool:
    message = str(error).lower()
    return isinstance(error, duckdb.IOException) and "lock" in message


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect_lake_read_only(target: str) -> duckdb.DuckDBPyConnection:
    """A locked-down connection to a DuckLake warehouse, attached READ_ONLY (the module's docstring).

    The data folder allowed is the one the catalog records (the lake's own ``data_path``),
    not a setting that could name another. ATTACH and SET take no bound parameters: the DSN
    (a setting) and the catalog's path are quoted as literals.
    """
    dsn = ducklake.catalog_dsn(target)
    check_reachable("THEMIS_WAREHOUSE (the DuckLake catalog)", *ducklake.catalog_endpoint(dsn))
    conn = duckdb.connect(
        config={key: value for key, value in READ_ONLY_CONFIG.items() if key != "enable_external_access"}
    )
    try:
        for name in ducklake.EXTENSION_PACKAGES:
            conn.execute(f"LOAD {_literal(str(ducklake.extension_file(name)))}")
        alias = ducklake.CATALOG_ALIAS
        attach = f"ATTACH {_literal(ducklake.PREFIX + 'postgres:' + dsn)} AS {alias} (READ_ONLY)"
        ducklake.attach_existing(conn, attach)  # an object store: httpfs and the S3 secret too
        conn.execute(f"USE {alias}")
        row = conn.execute("SELECT data_path FROM ducklake_settings(?)", [alias]).fetchone()
        if not row or not row[0]:
            raise ducklake.WarehouseConfigError(f"THEMIS_WAREHOUSE: the DuckLake catalog records no data path ({row})")
        data_path = str(row[0]) if str(row[0]).endswith("/") else f"{row[0]}/"
        ducklake.is_object_store(data_path)  # refuses a scheme other than s3://
        conn.execute(f"SET allowed_directories = [{_literal(data_path)}]")
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")
    except BaseException:
        conn.close()
        raise
    return conn


def connect_read_only(
    warehouse: Path | str,
    wait_s: float = DEFAULT_WAIT_S,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> duckdb.DuckDBPyConnection:
    """A locked-down read-only connection; retries with backoff for ``wait_s`` while a writer holds the file.

    A DuckLake target has no file lock (readers see the last committed snapshot):
    :func:`connect_lake_read_only`.
    """
    if ducklake.is_ducklake(str(warehouse)):
        return connect_lake_read_only(str(warehouse))
    deadline = clock() + max(wait_s, 0.0)
    delay = 0.05
    while True:
        try:
            conn = duckdb.connect(str(warehouse), read_only=True, config=READ_ONLY_CONFIG)
        except duckdb.Error as error:
            if not _is_lock_conflict(error):
                raise
            left = deadline - clock()
            if left <= 0:
                raise WarehouseBusy(
                    f"the warehouse {warehouse} is locked for writing (a run is storing results) "
                    f"and stayed locked for {wait_s:g} s; try again when it finishes, raise --wait, "
                    f"or query a copy (themis snapshot). DuckDB said: {error}"
                ) from error
            sleep(min(delay, left))
            delay = min(delay * 2, 1.0)
            continue
        try:
            for setting in AFTER_OPEN:
                conn.execute(setting)
        except BaseException:
            conn.close()
            raise
        return conn


def run_read_only(conn: duckdb.DuckDBPyConnection, sql: str, *, lake: bool = False) -> pd.DataFrame:
    """Check ``sql`` and run it on a connection from :func:`connect_read_only`; the last statement's result."""
    statements = checked_statements(conn, sql, lake=lake)
    try:
        for statement in statements[:-1]:
            conn.execute(statement)
        return conn.execute(statements[-1]).df()
    except duckdb.PermissionException as error:
        raise _outside(error) from error


def query_read_only(warehouse: Path | str, sql: str, wait_s: float = DEFAULT_WAIT_S) -> pd.DataFrame:
    """Run ``sql`` (one or more read statements) on the warehouse; the last statement's result.

    Raises :class:`RefusedQuery` for a statement that is not a read or that reaches outside
    the warehouse, :class:`WarehouseBusy` when a writer holds the file past ``wait_s``.
    """
    with connect_read_only(warehouse, wait_s) as conn:
        return run_read_only(conn, sql, lake=ducklake.is_ducklake(str(warehouse)))
