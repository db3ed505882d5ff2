"""When a stage may use a task's columnar hooks (whole frames in, the stage's frame out), and its item chunks.

A task may offer, beside its per-record hooks (which stay the definition), the four
``*_frame`` hooks of the task contract (``TaskModule`` in tasks/spec.py, where each is
documented): ``load_items_frame``, ``build_requests_frame``, ``judge_frame`` and
``compute_metrics_frame``. The loader resolves them into the task's ``TaskHooks``; here is
when a stage may use one. No record per row is built for them. A task that offers one must
test it equal to its per-record hook on the same inputs (crows_pairs:
tests/evaluation/test_task_frames.py). The stages use ``build_requests_frame`` and
``judge_frame`` only for item-local tasks (``ITEM_LOCAL``), and the judge only where no second
opinion follows (that one reads ``Judgment`` records); ``compute_metrics_frame`` reads the
judgments table, whoever wrote it, and ``load_items_frame`` only reads files, so any task may
offer these two.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import ItemsFrame, JudgeFrame, MetricsFrame, RequestsFrame
from themis_dagster.warehouse.tables import declared


def item_local(task: LoadedTask) -> bool:
    """Whether the task builds requests and judges each item on its own (its ``ITEM_LOCAL`` hook).

    Then the stages call ``build_requests`` and ``judge`` a chunk of items at a time; other
    tasks get the whole partition at once, as they always did.
    """
    return task.hooks.ITEM_LOCAL


def columnar_requests(task: LoadedTask) -> RequestsFrame | None:
    """The task's ``build_requests_frame``, where the stage may use it instead of ``build_requests``."""
    return task.hooks.build_requests_frame if item_local(task) else None


def columnar_judge(task: LoadedTask) -> JudgeFrame | None:
    """The task's ``judge_frame``, where the stage may use it instead of ``judge``."""
    if task.hooks.SECOND_OPINION is not None or not item_local(task):
        return None
    return task.hooks.judge_frame


def columnar_items(task: LoadedTask) -> ItemsFrame | None:
    """The task's ``load_items_frame``, where the stage may use it instead of ``load_items``."""
    return task.hooks.load_items_frame


def items_frame(
    load: ItemsFrame, key: EvaluationPartition, files: dict[str, Path], params: Any, dataset_sha256: str
) -> pl.DataFrame:
    """The partition's ``task_items`` frame from ``load_items_frame``."""
    return _in_table(
        "task_items", key, load(files, params).with_columns(pl.lit(dataset_sha256).alias("dataset_sha256"))
    )


def columnar_metrics(task: LoadedTask) -> MetricsFrame | None:
    """The task's ``compute_metrics_frame``, where the stage may use it instead of ``compute_metrics``."""
    return task.hooks.compute_metrics_frame


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
