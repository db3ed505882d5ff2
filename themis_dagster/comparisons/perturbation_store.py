"""Perturbation effects and the warehouse: which items a variant changed, both partitions' judgments, the rows.

The items a perturbation changed are read from the stored prompts, not trusted from a run's
metadata: an item is changed when any of its requests' texts differs from the original
partition's request of the same id (or the original has no such request).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime

import duckdb

from themis_dagster.comparisons.paired import ComparisonError
from themis_dagster.comparisons.perturbations import PerturbationEffect, perturbation_effects
from themis_dagster.comparisons.store import judgments_of
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import rows_frame
from themis_dagster.warehouse.read.perturbed import changed_item_ids
from themis_dagster.warehouse.transactions import transaction


def changed_items(conn: duckdb.DuckDBPyConnection, model: str, base_task: str, variant: str) -> set[str]:
    """The variant's items with a request whose text differs from the original's request of the same id."""
    return changed_item_ids(conn, model, base_task, variant)


def effects_in_warehouse(
    conn: duckdb.DuckDBPyConnection, task: LoadedTask, model: str, variant: str, perturbation: str
) -> list[PerturbationEffect]:
    """The variant's paired effects against ``task`` (its original), from the stored prompts and judgments.

    Fails (``ComparisonError``) naming what is missing when either partition has no judgments.
    """
    original, perturbed = judgments_of(conn, model, task.name), judgments_of(conn, model, variant)
    for name, judged in ((task.name, original), (variant, perturbed)):
        if not judged:
            raise ComparisonError(f"{variant}: {model} has no judgments on {name}; evaluate it first")
    changed = changed_items(conn, model, task.name, variant)
    rows = perturbation_effects(task, model, perturbation, original, perturbed, changed)
    return [_as_variant(row, variant) for row in rows]


def _as_variant(row: PerturbationEffect, variant: str) -> PerturbationEffect:
    """Effects are stored under the variant's task name (the partition they belong to)."""
    return replace(row, task=variant)


def store_effects(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    variant: str,
    base_task: str,
    perturbation_key: str,
    rows: Sequence[PerturbationEffect],
    *,
    run_id: str,
) -> int:
    """Replace, in one transaction, the rows of (model, variant) with ``rows``."""
    now = datetime.now(UTC).replace(tzinfo=None)
    records = []
    for row in rows:
        record = asdict(row)
        record.pop("p_adjusted")  # the view's, over the whole battery
        records.append(
            record
            | {"base_task": base_task, "perturbation_key": perturbation_key, "materialized_at": now, "run_id": run_id}
        )
    frame = rows_frame("perturbation_effect_results", records)
    with transaction(conn):
        conn.execute("DELETE FROM perturbation_effect_results WHERE model = ? AND task = ?", [model, variant])
        append_rows(conn, "perturbation_effect_results", frame)
    return frame.height
