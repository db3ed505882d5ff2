"""A task's optional columnar ``build_requests`` and ``judge``: whole frames in, the stage's frame out.

A task module may define, beside its per-record functions (which stay the definition):

- ``load_items_frame(files, params)``: the ``task_items`` columns (item_id, subset, fields)
  out, ``fields`` already encoded as JSON text, rows in ``load_items``' order;
- ``build_requests_frame(items, params, templates)``: the partition's ``task_items`` frame in,
  the ``prompts`` columns less (model, task) out, rows in ``build_requests``' order;
- ``judge_frame(items, responses, params)``: the ``task_items`` and ``responses`` frames in,
  the ``judgments`` columns less (model, task) out, ``detail`` already encoded as JSON text;
- ``compute_metrics_frame(judgments, params)``: the partition's ``judgments`` frame in (as the
  warehouse holds it), ``compute_metrics``' ``MetricValue`` list out, bit for bit.

No record per row is built for them. A task that offers one must test it equal to its
per-record function on the same inputs (crows_pairs: tests/test_columnar_task_functions.py).
The stages use the first two only for item-local tasks (``ITEM_LOCAL``), and the judge only
where no second opinion follows (that one reads ``Judgment`` records); the metrics' one reads
the judgments table, whoever wrote it, and the items' one only reads files, so any task may
offer these two.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from themis_dagster.partitions import EvaluationPartition
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import MetricValue
from themis_dagster.warehouse.tables import declared

JudgeFrame = Callable[[pl.DataFrame, pl.DataFrame, Any], pl.DataFrame]
RequestsFrame = Callable[[pl.DataFrame, Any, dict[str, str]], pl.DataFrame]
ItemsFrame = Callable[[dict[str, Path], Any], pl.DataFrame]
MetricsFrame = Callable[[pl.DataFrame, Any], list[MetricValue]]


def _offered(task: LoadedTask, name: str) -> Any:
    if not getattr(task.module, "ITEM_LOCAL", False):
        return None
    return getattr(task.module, name, None)


def columnar_requests(task: LoadedTask) -> RequestsFrame | None:
    """The task's ``build_requests_frame``, where the stage may use it instead of ``build_requests``."""
    return _offered(task, "build_requests_frame")  # type: ignore[no-any-return]


def columnar_judge(task: LoadedTask) -> JudgeFrame | None:
    """The task's ``judge_frame``, where the stage may use it instead of ``judge``."""
    if task.second_opinion is not None:
        return None
    return _offered(task, "judge_frame")  # type: ignore[no-any-return]


def columnar_items(task: LoadedTask) -> ItemsFrame | None:
    """The task's ``load_items_frame``, where the stage may use it instead of ``load_items``."""
    return getattr(task.module, "load_items_frame", None)


def items_frame(
    load: ItemsFrame, key: EvaluationPartition, files: dict[str, Path], params: Any, dataset_sha256: str
) -> pl.DataFrame:
    """The partition's ``task_items`` frame from ``load_items_frame``."""
    return _in_table(
        "task_items", key, load(files, params).with_columns(pl.lit(dataset_sha256).alias("dataset_sha256"))
    )


def columnar_metrics(task: LoadedTask) -> MetricsFrame | None:
    """The task's ``compute_metrics_frame``, where the stage may use it instead of ``compute_metrics``."""
    return getattr(task.module, "compute_metrics_frame", None)


def _in_table(table: str, key: EvaluationPartition, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the partition's (model, task), in the table's column order and types."""
    declaration = declared(table)
    frame = frame.with_columns(pl.lit(key.model).alias("model"), pl.lit(key.task).alias("task"))
    declaration.check_columns(frame.columns)
    return frame.select(declaration.column_names).cast(declaration.frame_schema)  # type: ignore[arg-type]


def requests_frame(
    build: RequestsFrame, key: EvaluationPartition, items: pl.DataFrame, params: Any, templates: dict[str, str]
) -> pl.DataFrame:
    """The partition's prompts frame from ``build_requests_frame``."""
    return _in_table("prompts", key, build(items, params, templates))


def judged_frame(
    judge_frame: JudgeFrame, key: EvaluationPartition, items: pl.DataFrame, responses: pl.DataFrame, params: Any
) -> pl.DataFrame:
    """The partition's judgments frame from ``judge_frame``: one row per item."""
    judged = _in_table("judgments", key, judge_frame(items, responses, params))
    if judged.height != items.height:
        raise ValueError(f"{key}: judge_frame returned {judged.height} judgments for {items.height} items")
    return judged
