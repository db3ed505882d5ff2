"""Check the warehouse file before a run writes to it, without ever opening it for writing.

A read-write open of a damaged DuckDB file can "repair" it: a truncated file opened for
writing grew back to its old size, zero-filled, and later reads failed their checksums.
So the check opens the file read-only and only reads:

- the open itself: DuckDB checks the magic bytes, the database headers and the checksums
  of the metadata blocks it reads (a file of random bytes fails here);
- each table's segment list (``pragma_storage_info``) and row count, which makes DuckDB
  load every table's metadata; the highest block in use must lie inside the file, so a
  truncated file is found even when its remaining blocks still read cleanly (DuckDB itself
  notices only when it reads a missing block).

Data blocks are not read (that would cost a full scan per run); DuckDB verifies each block's
checksum whenever a query reads it, so damage there fails the query instead of answering.
DuckDB has no standalone verify command (1.5). A missing file is fine (a new warehouse);
a damaged one is reported and left exactly as it is, never replaced by an empty one.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from themis_dagster.warehouse.lock_wait import DEFAULT_LOCK_TIMEOUT_S, connect_waiting

# The main header and the two database headers precede the blocks (DuckDB storage format).
HEADER_BYTES = 3 * 4096


class WarehouseCorruptedError(RuntimeError):
    """The warehouse file cannot be read back as it was written; nothing was written to it."""


def _corrupted(path: Path, reason: str) -> WarehouseCorruptedError:
    return WarehouseCorruptedError(
        f"warehouse {path} failed its integrity check and was not written to: {reason}. "
        "Restore it from a backup (or `themis snapshot` copy), or move it away to start a new one."
    )


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _last_block_in_use(conn: duckdb.DuckDBPyConnection, tables: list[str]) -> int:
    """The highest block id holding metadata or table data (-1 for an empty database)."""
    used = [row[0] for row in conn.execute("SELECT block_id FROM pragma_metadata_info()").fetchall()]
    for table in tables:
        rows = conn.execute(
            "SELECT block_id, additional_block_ids FROM pragma_storage_info(?) WHERE block_id >= 0", [table]
        ).fetchall()
        for block_id, additional in rows:
            used.append(block_id)
            used.extend(additional or [])
    return max(used, default=-1)


def _inspect(conn: duckdb.DuckDBPyConnection, path: Path, size: int) -> None:
    block_size = conn.execute(
        "SELECT block_size FROM pragma_database_size() WHERE database_name = current_database()"
    ).fetchone()
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchall()
    ]
    needed = HEADER_BYTES + (_last_block_in_use(conn, tables) + 1) * int(block_size[0] if block_size else 0)
    if size < needed:
        raise _corrupted(path, f"the file has {size} bytes but its blocks in use need {needed} (truncated)")
    for table in tables:  # table names come from the catalog; quoted, not bound (identifiers cannot be)
        conn.execute(f"SELECT count(*) FROM {_quote(table)}").fetchone()  # noqa: S608


def check_warehouse(path: Path, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> None:
    """Raise ``WarehouseCorruptedError`` unless ``path`` is missing or a readable DuckDB database.

    Waits (as writers do) while another process holds the file.
    """
    if not path.exists():
        return
    size = path.stat().st_size
    if size == 0:
        raise _corrupted(path, "the file is empty (0 bytes)")
    try:
        conn = connect_waiting(str(path), read_only=True, timeout_s=lock_timeout_s)
    except duckdb.ConnectionException:
        return  # this process has it open already (read-write): DuckDB read it then, nothing to add
    except duckdb.Error as error:  # a lock held too long is WarehouseLockTimeout, not this
        raise _corrupted(path, f"DuckDB cannot open it ({error})") from error
    try:
        _inspect(conn, path, size)
    except duckdb.Error as error:
        raise _corrupted(path, f"reading it back failed ({error})") from error
    finally:
        conn.close()
