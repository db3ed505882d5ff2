"""The warehouse resource: short-lived DuckDB connections with the schema ensured.

``database`` is a DuckDB file (the embedded default) or a DuckLake target
(``ducklake:postgres:...`` with ``data_path``: ``warehouse/ducklake.py``), chosen by
``THEMIS_WAREHOUSE`` alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from dagster import InitResourceContext
from dagster_duckdb import DuckDBResource
from pydantic import Field, PrivateAttr

from themis_dagster.runs.owner import owner_tags
from themis_dagster.runs.reachability import check_reachable
from themis_dagster.warehouse import ducklake
from themis_dagster.warehouse.integrity import check_warehouse
from themis_dagster.warehouse.lock_wait import DEFAULT_LOCK_TIMEOUT_S, connect_waiting
from themis_dagster.warehouse.schema import ensure_schema

IN_MEMORY = ":memory:"


class WarehouseResource(DuckDBResource):
    """DuckDBResource plus our schema, a configurable wait for other processes' locks and an integrity check.

    Connections are opened per stage and closed at once: never held during inference,
    so concurrent runs and readers wait seconds, not the length of a run. A connection
    waits up to ``lock_timeout_s`` while another process holds the file (only that error is
    retried). The first connection of each run (and of each resource used outside a run)
    checks the file read-only first: a damaged warehouse is reported, never opened for writing.
    """

    lock_timeout_s: float = Field(
        default=DEFAULT_LOCK_TIMEOUT_S,
        description="Seconds to wait while another process holds the warehouse (THEMIS_WAREHOUSE_LOCK_TIMEOUT_S).",
    )
    data_path: str = Field(
        default="", description="A DuckLake warehouse's data folder or object store URL (THEMIS_WAREHOUSE_DATA_PATH)."
    )
    _checked: bool = PrivateAttr(default=False)
    _schema_ready: bool = PrivateAttr(default=False)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Check the file again for each run, and record this process as the run's owner (``runs.owner``).

        Every run that writes the warehouse uses this resource, so each such run, whoever
        launched it, can be recognised as dead later if its process is killed.
        """
        self._checked = False
        if context.instance is not None and context.run_id is not None:
            context.instance.add_run_tags(context.run_id, owner_tags(context.run_id))

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection, after the integrity check, waiting for other processes' locks."""
        if ducklake.is_ducklake(self.database):
            with self._ducklake_connection() as lake:
                yield lake
            return
        if self.database != IN_MEMORY and not self._checked:
            check_warehouse(Path(self.database), self.lock_timeout_s)
            self._checked = True
        config = {"custom_user_agent": "dagster", **self.connection_config}  # as DuckDBResource does
        conn = connect_waiting(self.database, read_only=False, timeout_s=self.lock_timeout_s, config=config)
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _ducklake_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """DuckLake: no file lock to wait for (writers conflict at commit instead: ``with_commit_retries``).

        The catalog, and an object store holding the data path, are checked once for reachability.
        """
        if not self._checked:  # an unreachable catalog fails before any engine starts, naming the setting
            host, port = ducklake.catalog_endpoint(ducklake.catalog_dsn(self.database))
            check_reachable("THEMIS_WAREHOUSE (the DuckLake catalog)", host, port)
            if ducklake.is_object_store(self.data_path):  # and so does its object store, naming the endpoint's setting
                setting, host, port = ducklake.object_store_endpoint(self.data_path, ducklake.s3_settings())
                check_reachable(f"{setting} (the DuckLake data path's object store)", host, port)
            self._checked = True
        conn = ducklake.connect(self.database, self.data_path)
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if ducklake.is_ducklake(self.database):
            with self.get_connection() as conn:
                if not self._schema_ready:  # once per process: each CREATE OR REPLACE VIEW is a catalog commit
                    ducklake.with_commit_retries(lambda: ensure_schema(conn, constraints=False), "schema")
                    self._schema_ready = True
                yield conn
            return
        if self.database != IN_MEMORY:
            Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        with self.get_connection() as conn:
            ensure_schema(conn)
            yield conn
