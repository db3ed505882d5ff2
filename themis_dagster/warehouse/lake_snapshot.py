"""``themis snapshot`` on a DuckLake warehouse: one of the lake's own snapshots, copied to a DuckDB file.

On a DuckDB file, ``themis snapshot`` copies the file so a BI tool can hold it open without
blocking runs. A DuckLake warehouse blocks no one (readers see the last committed snapshot),
but its snapshots are what make a copy meaningful: every commit is a numbered snapshot
(``ducklake_snapshots()``), and attaching with ``SNAPSHOT_VERSION`` reads the whole lake as it
was at one of them. The copy is of one snapshot, named in the result, so it is consistent even
while runs commit, and the same rows stay reachable in the lake itself with
``AT (VERSION => n)`` (``themis sql``) until the snapshot is expired.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from themis_dagster.runs.reachability import check_reachable
from themis_dagster.warehouse import ducklake

SOURCE = "lake_source"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _loaded() -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in ducklake.EXTENSION_PACKAGES:
        conn.execute(f"LOAD {_literal(str(ducklake.extension_file(name)))}")
    return conn


def current_version(target: str) -> int:
    """The lake's latest committed snapshot id."""
    with _loaded() as conn:
        ducklake.attach_existing(
            conn,
            f"ATTACH {_literal(ducklake.PREFIX + 'postgres:' + ducklake.catalog_dsn(target))} AS {SOURCE} (READ_ONLY)",
        )
        row = conn.execute("SELECT id FROM ducklake_current_snapshot(?)", [SOURCE]).fetchone()
    assert row is not None
    return int(row[0])


def snapshot_lake(target: str, dest: Path, version: int | None = None) -> tuple[Path, int]:
    """Copy the lake as of snapshot ``version`` (default: the latest) to the DuckDB file ``dest``.

    The copy is written beside ``dest`` and renamed over it once complete, so a reader of
    ``dest`` sees the previous copy or the new one, never half of one. ATTACH takes no bound
    parameters: the DSN (a setting), the path and the version (an int) are quoted as literals.
    """
    host, port = ducklake.catalog_endpoint(ducklake.catalog_dsn(target))
    check_reachable("THEMIS_WAREHOUSE (the DuckLake catalog)", host, port)
    chosen = current_version(target) if version is None else int(version)
    staging = dest.with_name(dest.name + ".partial")
    staging.unlink(missing_ok=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dsn = ducklake.catalog_dsn(target)
    with _loaded() as conn:
        try:
            ducklake.attach_existing(  # an object store: httpfs and the S3 secret too
                conn,
                f"ATTACH {_literal(ducklake.PREFIX + 'postgres:' + dsn)} AS {SOURCE} "
                f"(READ_ONLY, SNAPSHOT_VERSION {chosen:d})",
            )
        except duckdb.Error as error:
            raise ducklake.WarehouseConfigError(f"the DuckLake warehouse has no snapshot {chosen}: {error}") from error
        conn.execute(f"ATTACH {_literal(str(staging))} AS snapshot")
        conn.execute(f"COPY FROM DATABASE {SOURCE} TO snapshot")
        conn.execute("DETACH snapshot")
    staging.replace(dest)
    return dest, chosen
