"""``evaluation_runs``: the reproducibility record of every materialized evaluation, the task declarations
(metrics, ideals) each record carries and its ``model_precision`` view; ``task_items``' dataset hashes beside them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from themis_dagster.warehouse.read.query import rows


def parse_config(raw: object) -> dict[str, Any]:
    """The evaluation_runs ``config`` as a dict, whatever was stored (JSON text, dict, garbage)."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def dig(config: Mapping[str, Any], *keys: str) -> Any:
    """``config[k1][k2]...`` or None when any level is missing or not a mapping."""
    node: Any = config
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


@dataclass(frozen=True)
class RunRecord:
    """One evaluation_runs row; ``config`` is {} when it does not parse."""

    task: str
    run_id: str
    materialized_at: datetime | None
    config: dict[str, Any]


_RUNS = "SELECT task, run_id, materialized_at, config FROM evaluation_runs WHERE model = ? "
_LATEST = "QUALIFY row_number() OVER (PARTITION BY task ORDER BY materialized_at DESC, run_id) = 1 ORDER BY task"


def _records(conn: duckdb.DuckDBPyConnection, model: str, order: str) -> list[RunRecord]:
    return [
        RunRecord(str(row["task"]), str(row["run_id"]), row["materialized_at"], parse_config(row["config"]))
        for row in rows(conn, _RUNS + order, [model])
    ]


def latest_runs(conn: duckdb.DuckDBPyConnection, model: str) -> list[RunRecord]:
    """The latest record of each task ``model`` was evaluated on, by task."""
    return _records(conn, model, _LATEST)


def all_runs(conn: duckdb.DuckDBPyConnection, model: str) -> list[RunRecord]:
    """Every record of ``model``, newest first."""
    return _records(conn, model, "ORDER BY materialized_at DESC, task")


def latest_config(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> dict[str, Any] | None:
    """The configuration of the latest evaluation of (model, task); None: none recorded (an imported model)."""
    found = rows(
        conn,
        "SELECT config FROM evaluation_runs WHERE model = ? AND task = ? ORDER BY materialized_at DESC LIMIT 1",
        [model, task],
    )
    return None if not found else parse_config(found[0]["config"])


def task_declarations(conn: duckdb.DuckDBPyConnection) -> dict[str, list[dict[str, Any]]]:
    """Each task's declared metrics (name, ideal, higher_is_better...) as its latest evaluation recorded them."""
    found = rows(conn, "SELECT task, arg_max(config, materialized_at) AS config FROM evaluation_runs GROUP BY task")
    declared: dict[str, list[dict[str, Any]]] = {}
    for row in found:
        metrics = dig(parse_config(row["config"]), "task", "metrics")
        declared[str(row["task"])] = [m for m in metrics if isinstance(m, dict)] if isinstance(metrics, list) else []
    return declared


def dataset_hashes(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> list[str]:
    """The sha256 of the dataset files (model, task)'s items came from (``task_items``)."""
    found = rows(
        conn, "SELECT DISTINCT dataset_sha256 FROM task_items WHERE model = ? AND task = ? ORDER BY 1", [model, task]
    )
    return [str(row["dataset_sha256"]) for row in found]


@dataclass(frozen=True)
class Precision:
    """The dtype a partition's answers were computed in (``dtype: auto`` resolved for the device), and why."""

    task: str
    dtype: str
    reason: str | None
    device: str | None
    declared_dtype: str | None


def precisions(conn: duckdb.DuckDBPyConnection, model: str) -> list[Precision]:
    """``model_precision``: per task of ``model``, the dtype its latest answers were computed in, by task."""
    found = rows(
        conn,
        "SELECT task, dtype, dtype_reason, device, declared_dtype FROM model_precision WHERE model = ? ORDER BY task",
        [model],
    )
    return [
        Precision(str(row["task"]), str(row["dtype"]), row["dtype_reason"], row["device"], row["declared_dtype"])
        for row in found
    ]


def dtypes(conn: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Every model's resolved dtypes (``model_precision``: one per model unless its tasks ran on several devices)."""
    found = rows(
        conn, "SELECT model, list(DISTINCT dtype ORDER BY dtype) AS dtypes FROM model_precision GROUP BY model"
    )
    return {str(row["model"]): [str(d) for d in row["dtypes"] or []] for row in found}
