"""Judging step 2: the task's own ``judge`` on the partition's guarded replies.

How much of the partition is judged at once depends on the task: an item-local task without a
second opinion is judged a column at a time (``judge_frame``) or a chunk of items at a time;
any other task, and every task with a second opinion (which reads ``Judgment`` records), the
whole partition at once.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.stage_io import RECORD_CHUNK, ByItem, stage_frame
from themis_dagster.evaluation.task_frames import columnar_judge, item_local, judged_frame
from themis_dagster.exchange import Request, Response
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Item, Judgment
from themis_dagster.warehouse.frames import from_frame, iter_records


def judged_in_chunks(task: LoadedTask) -> bool:
    """Whether the task's judgments come out as frames (columnar or by item chunks), with no second opinion."""
    return item_local(task) and task.second_opinion is None


def reads_prompts(task: LoadedTask) -> bool:
    """Whether the task's ``judge`` reads the partition's requests (a columnar ``judge_frame`` does not)."""
    return columnar_judge(task) is None


def judge_frame(
    task: LoadedTask,
    key: EvaluationPartition,
    items: pl.DataFrame,
    prompts: Callable[[], pl.DataFrame],
    responses: pl.DataFrame,
) -> pl.DataFrame:
    """An item-local task's judgments frame (only for ``judged_in_chunks`` tasks): its ``judge_frame`` a column
    at a time where it offers one, else ``judge_by_chunks``; ``prompts`` are read only for the latter."""
    if (columnar := columnar_judge(task)) is not None:
        return judged_frame(columnar, key, items, responses, task.params)
    return judge_by_chunks(task, key, items, prompts(), responses)


def judge_by_chunks(
    task: LoadedTask, key: EvaluationPartition, items: pl.DataFrame, prompts: pl.DataFrame, responses: pl.DataFrame
) -> pl.DataFrame:
    """An item-local task's judgments, ``RECORD_CHUNK`` items at a time (what lines rows up dies on return).

    Each chunk's requests are built only if its ``judge`` reads them (``LazyRecords``).
    """
    requests, answers = ByItem(items, prompts), ByItem(items, responses)
    judged_chunks = (
        task.hooks.judge(
            batch,
            requests.lazy_records("prompts", Request, start, start + len(batch)),
            answers.records("responses", Response, start, start + len(batch)),
            task.params,
        )
        for start, batch in zip(
            range(0, items.height, RECORD_CHUNK), iter_records("task_items", items, Item, RECORD_CHUNK), strict=True
        )
    )
    return stage_frame("judgments", key, judged_chunks)


def judge_records(
    task: LoadedTask, items: pl.DataFrame, prompts: pl.DataFrame, responses: pl.DataFrame
) -> list[Judgment]:
    """The task's ``judge`` over the whole partition, as records (what a second opinion re-judges)."""
    return task.hooks.judge(
        from_frame("task_items", items, Item),
        from_frame("prompts", prompts, Request),
        from_frame("responses", responses, Response),
        task.params,
    )
