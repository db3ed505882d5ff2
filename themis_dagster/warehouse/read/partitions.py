"""``partition_status``: whether each (model, task) partition is complete, the one definition of "complete".

A partition is complete when its five stages are present and each was computed from the one
before it as it is now (``sql/views.sql``); the ``metrics`` view shows complete partitions only,
so a reader that finds no metric of a partition asks here why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from themis_dagster.warehouse.read.query import rows


@dataclass(frozen=True)
class PartitionStatus:
    """``complete``, or ``status`` says what is missing and that the partition must be materialized again."""

    model: str
    task: str
    complete: bool
    status: str
    last_written_at: datetime | None


def partition_statuses(conn: duckdb.DuckDBPyConnection, model: str | None = None) -> list[PartitionStatus]:
    """The status of every partition (of ``model``) that records its stages, by model and task."""
    found = rows(
        conn,
        "SELECT model, task, complete, status, last_written_at FROM partition_status "
        "WHERE ?::VARCHAR IS NULL OR model = ? ORDER BY model, task",
        [model, model],
    )
    return [
        PartitionStatus(str(r["model"]), str(r["task"]), bool(r["complete"]), str(r["status"]), r["last_written_at"])
        for r in found
    ]


def partition_status(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> PartitionStatus | None:
    """One partition's status; None when it records no stages (written before they were recorded, or never)."""
    return next((s for s in partition_statuses(conn, model) if s.task == task), None)


def incomplete(conn: duckdb.DuckDBPyConnection, model: str | None = None) -> list[PartitionStatus]:
    """The partitions (of ``model``) the ``metrics`` view hides until a run completes them."""
    return [status for status in partition_statuses(conn, model) if not status.complete]
