"""Which materialization of each stage a partition holds, so readers never mix generations.

A partition's stages are written one at a time, by one run or several: a run killed after
``rendered_prompts`` leaves new prompts beside old responses, judgments and metrics. Each
stage's write records, in the same transaction as its rows, a new ``materialization`` id
and the id of the upstream materialization it was computed from; the partition's
``generation`` is the ``task_items`` materialization the chain descends from. The
``partition_status`` view (``warehouse/sql/views.sql``) follows those links: a partition is complete
only when every stage is present and each was computed from the one before it as it is now,
and the ``metrics`` views show only complete partitions.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import NamedTuple

import duckdb
import polars as pl

from themis_dagster.warehouse.frames import rows_frame

# The evaluation chain's tables, each computed from the one before it.
STAGES = ("task_items", "prompts", "responses", "judgments", "metric_values")
UPSTREAM = dict(zip(STAGES[1:], STAGES[:-1], strict=True))


class Materialization(NamedTuple):
    """One stage write: its own id and the partition generation it belongs to."""

    materialization: str
    generation: str


def current(conn: duckdb.DuckDBPyConnection, stage: str, model: str, task: str) -> Materialization | None:
    """The materialization of ``stage`` the partition holds now (None: never recorded)."""
    row = conn.execute(
        "SELECT materialization, generation FROM stage_generations WHERE model = ? AND task = ? AND stage = ?",
        [model, task, stage],
    ).fetchone()
    return Materialization(row[0], row[1]) if row else None


def record(
    stage: str, model: str, task: str, upstream: Materialization | None, run_id: str
) -> tuple[Materialization, pl.DataFrame]:
    """A new materialization of ``stage`` computed from ``upstream``, and its ``stage_generations`` row.

    The caller writes the row in the same transaction as the stage's own rows
    (``partitions.replace_rows``). ``task_items`` starts a new generation; every other
    stage inherits its upstream's (a missing upstream record, from a warehouse written before
    generations, starts one too, and ``partition_status`` shows the broken link).
    """
    if stage not in STAGES:
        raise KeyError(f"not an evaluation stage: {stage!r}")
    materialization = uuid.uuid4().hex
    generation = upstream.generation if upstream is not None and stage != "task_items" else materialization
    row = {
        "model": model,
        "task": task,
        "stage": stage,
        "materialization": materialization,
        "upstream_materialization": upstream.materialization if upstream is not None else None,
        "generation": generation,
        "run_id": run_id,
        "written_at": datetime.now(UTC).replace(tzinfo=None),
    }
    return Materialization(materialization, generation), rows_frame("stage_generations", [row])
