"""``themis snapshot`` on a DuckDB file: a consistent copy that BI tools can hold open without blocking runs.

A DuckLake warehouse is copied from one of its own snapshots instead (``lake_snapshot.py``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def snapshot(warehouse: Path, target: Path) -> Path:
    """Copy the warehouse, consistently, to ``target`` for long analyst sessions and BI tools.

    The source is attached read-only for the seconds the copy takes, so a session on the
    snapshot never holds the file lock that runs need for writing.
    """
    staging = target.with_name(target.name + ".partial")
    staging.unlink(missing_ok=True)
    with duckdb.connect() as conn:
        # ATTACH takes no bound parameters: the paths (settings, not user input) are quoted as literals.
        conn.execute(f"ATTACH {_literal(str(warehouse))} AS source (READ_ONLY)")
        conn.execute(f"ATTACH {_literal(str(staging))} AS snapshot")
        conn.execute("COPY FROM DATABASE source TO snapshot")
        conn.execute("DETACH snapshot")
    staging.replace(target)
    return target
