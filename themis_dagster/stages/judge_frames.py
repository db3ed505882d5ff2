"""A task's optional columnar ``judge``: whole frames in, the judgments frame out, no record per row.

A task module may define ``judge_frame(items, responses, params)`` beside ``judge``, taking the
partition's ``task_items`` and ``responses`` frames and returning the ``judgments`` columns less
(model, task), with ``detail`` already encoded as JSON text. ``judge`` stays the definition: a
task that offers both must test them equal on the same inputs (crows_pairs:
tests/test_judge_frames.py). The stage uses it only where ``judge`` would see the items alone
(``ITEM_LOCAL``) and no second opinion follows (that one reads ``Judgment`` records).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from themis_dagster.partitions import EvaluationPartition
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.warehouse.tables import declared

JudgeFrame = Callable[[pl.DataFrame, pl.DataFrame, Any], pl.DataFrame]


def columnar_judge(task: LoadedTask) -> JudgeFrame | None:
    """The task's ``judge_frame``, where the stage may use it instead of ``judge``."""
    judge_frame = getattr(task.module, "judge_frame", None)
    if judge_frame is None or task.second_opinion is not None:
        return None
    if not getattr(task.module, "ITEM_LOCAL", False):
        return None
    return judge_frame  # type: ignore[no-any-return]


def judged_frame(
    judge_frame: JudgeFrame, key: EvaluationPartition, items: pl.DataFrame, responses: pl.DataFrame, params: Any
) -> pl.DataFrame:
    """The partition's judgments frame: ``judge_frame``'s rows with (model, task), in the table's column order."""
    judgments = declared("judgments")
    judged = judge_frame(items, responses, params)
    judged = judged.with_columns(pl.lit(key.model).alias("model"), pl.lit(key.task).alias("task"))
    judgments.check_columns(judged.columns)
    if judged.height != items.height:
        raise ValueError(f"{key}: judge_frame returned {judged.height} judgments for {items.height} items")
    return judged.select(judgments.column_names).cast(judgments.frame_schema)  # type: ignore[arg-type]
