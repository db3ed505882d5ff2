"""Hand-made partitions for the read layer's tests of items, pairs and variants: rows written as the stages write
them (``to_frame``), into a fresh warehouse."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from themis_dagster.exchange import Request, Response
from themis_dagster.tasks.spec import Item, Judgment
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import to_frame
from themis_dagster.warehouse.schema import ensure_schema


def write_partition(
    path: Path,
    model: str,
    task: str,
    *,
    items: Sequence[Item] = (),
    requests: Sequence[Request] = (),
    responses: Sequence[Response] = (),
    judgments: Sequence[Judgment] = (),
) -> Path:
    """Append one partition's rows to the warehouse at ``path`` (created with the schema when new)."""
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        for table, records in (("task_items", items), ("prompts", requests), ("responses", responses),
                               ("judgments", judgments)):  # fmt: skip
            if records:
                extra = {"dataset_sha256": "0" * 64} if table == "task_items" else {}
                frame = to_frame(table, list(records), model=model, task=task, **extra)  # type: ignore[arg-type]
                append_rows(conn, table, frame)
    return path
