"""Comparisons and the warehouse: read two models' judgments, refuse incompatible runs, replace the rows.

Every query binds its values; table names come only from the declarations. Reads go through the
read layer (``warehouse/read``); the writes are here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import duckdb
import polars as pl

from themis_dagster.comparisons.gates import Gate
from themis_dagster.comparisons.paired import Comparison, ComparisonError, compare_task
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Judgment
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import from_frame, rows_frame
from themis_dagster.warehouse.partitions import replace_table
from themis_dagster.warehouse.read.comparisons import pair_frame
from themis_dagster.warehouse.read.runs import dataset_hashes, latest_config
from themis_dagster.warehouse.reads import read_partition
from themis_dagster.warehouse.transactions import transaction


def judgments_of(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> list[Judgment]:
    return from_frame("judgments", read_partition(conn, "judgments", model, task), Judgment)


def _differences(left: Any, right: Any, path: str) -> list[str]:
    """Dotted paths where two JSON values differ, with both values."""
    if isinstance(left, dict) and isinstance(right, dict):
        found = []
        for key in sorted(set(left) | set(right)):
            found += _differences(left.get(key), right.get(key), f"{path}.{key}")
        return found
    return [] if left == right else [f"{path}: {left!r} vs {right!r}"]


def check_comparable(conn: duckdb.DuckDBPyConnection, task: str, model: str, baseline: str) -> list[str]:
    """Raise ComparisonError when the two evaluations used other task parameters, declarations or data.

    Reads the latest ``evaluation_runs`` record of each (the task's declaration and
    parameters) and the dataset hashes in ``task_items``. Returns notes on what could not
    be checked (an imported model has no run record).
    """
    differ: list[str] = []
    hashes = dataset_hashes(conn, model, task), dataset_hashes(conn, baseline, task)
    if hashes[0] and hashes[1] and hashes[0] != hashes[1]:
        differ.append(f"dataset_sha256: {hashes[0]} vs {hashes[1]}")
    configs = latest_config(conn, model, task), latest_config(conn, baseline, task)
    notes = [
        f"{who} has no evaluation_runs record for {task}"
        for who, c in zip((model, baseline), configs, strict=True)
        if c is None
    ]
    if configs[0] is not None and configs[1] is not None:
        differ += _differences(configs[0].get("task_params"), configs[1].get("task_params"), "task_params")
        differ += _differences(configs[0].get("task"), configs[1].get("task"), "task")
    if differ:
        raise ComparisonError(
            f"{task}: {model} and {baseline} were evaluated differently, so their items are not comparable: "
            + "; ".join(differ)
        )
    return notes


def compare_in_warehouse(
    conn: duckdb.DuckDBPyConnection, task: LoadedTask, model: str, baseline: str
) -> tuple[list[Comparison], list[str]]:
    """Check the two evaluations are comparable, then compare their judgments on ``task``."""
    notes = check_comparable(conn, task.name, model, baseline)
    mine, theirs = judgments_of(conn, model, task.name), judgments_of(conn, baseline, task.name)
    for who, judged in ((model, mine), (baseline, theirs)):
        if not judged:
            raise ComparisonError(f"{task.name}: {who} has no judgments; evaluate it on {task.name} first")
    return compare_task(task, model, baseline, mine, theirs), notes


def store_comparisons(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    baseline: str,
    task: str,
    rows: Sequence[Comparison],
    *,
    origin: str,
    run_id: str,
) -> int:
    """Replace, in one transaction, the rows of (model, baseline, task) with ``rows``."""
    now = datetime.now(UTC).replace(tzinfo=None)
    frame = rows_frame(
        "comparison_results",
        [asdict(row) | {"origin": origin, "materialized_at": now, "run_id": run_id} for row in rows],
    )
    with transaction(conn):
        conn.execute(
            "DELETE FROM comparison_results WHERE model = ? AND baseline = ? AND task = ?", [model, baseline, task]
        )
        append_rows(conn, "comparison_results", frame)
    return frame.height


def clear_parent_comparisons(conn: duckdb.DuckDBPyConnection, model: str, task: str, keep_baseline: str | None) -> None:
    """Drop lineage rows of (model, task) against any baseline but ``keep_baseline`` (the parent changed)."""
    conn.execute(
        "DELETE FROM comparison_results WHERE model = ? AND task = ? AND origin = 'parent' "
        "AND baseline IS DISTINCT FROM ?",
        [model, task, keep_baseline],
    )


def store_gates(conn: duckdb.DuckDBPyConnection, gates: Sequence[Gate]) -> None:
    """The gate file's gates, as the ``gate_verdicts`` view reads them."""
    replace_table(conn, "comparison_gates", rows_frame("comparison_gates", [gate.model_dump() for gate in gates]))


def comparison_view(
    conn: duckdb.DuckDBPyConnection, model: str, baseline: str, task: str | None = None
) -> pl.DataFrame:
    """The ``comparisons`` view's rows of one pair (one task, or all), headline rows first."""
    return pair_frame(conn, "comparisons", model, baseline, task)


def gate_view(conn: duckdb.DuckDBPyConnection, model: str, baseline: str, task: str | None = None) -> pl.DataFrame:
    """The ``gate_verdicts`` view's rows of one pair (one task, or all)."""
    return pair_frame(conn, "gate_verdicts", model, baseline, task)


def run_comparisons(
    conn: duckdb.DuckDBPyConnection,
    tasks: Sequence[LoadedTask],
    model: str,
    baseline: str,
    gates: Sequence[Gate],
    *,
    origin: str,
    run_id: str,
    into: duckdb.DuckDBPyConnection | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Compare ``model`` with ``baseline`` on ``tasks``, store the rows, and return the view's rows and verdicts.

    Every task is checked (comparable runs, items in common) before anything is written. ``into``: store the rows
    and read the views there instead of in ``conn`` (a scratch database with the warehouse's schema: the
    explorer compares on a read-only connection and writes nothing).
    """
    notes = [f"{model} is compared with itself: every difference is 0 and every p-value 1"] if model == baseline else []
    results = []
    for task in tasks:
        rows, task_notes = compare_in_warehouse(conn, task, model, baseline)
        results.append((task.name, rows))
        notes += task_notes
    target = conn if into is None else into
    store_gates(target, gates)
    for name, rows in results:
        store_comparisons(target, model, baseline, name, rows, origin=origin, run_id=run_id)
    names = [task.name for task in tasks]
    view = comparison_view(target, model, baseline).filter(pl.col("task").is_in(names))
    verdicts = gate_view(target, model, baseline).filter(pl.col("task").is_in(names))
    return view, verdicts, notes
