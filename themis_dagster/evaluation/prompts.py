"""Stage 2, ``prompts``: one row per engine request, rendered from the partition's items."""

from __future__ import annotations

import polars as pl

from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.stage_io import RECORD_CHUNK, chunked, stage_frame
from themis_dagster.evaluation.task_frames import columnar_requests, item_local, requests_frame
from themis_dagster.tasks.family import family_of
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.placeholders import check_prompts
from themis_dagster.tasks.spec import Item
from themis_dagster.warehouse.frames import from_frame, iter_records


def render_prompts(task: LoadedTask, key: EvaluationPartition, items: pl.DataFrame) -> pl.DataFrame:
    """The partition's ``prompts`` frame from its ``task_items`` frame.

    An item-local task's ``build_requests_frame`` a column at a time, or its ``build_requests`` a
    chunk of items at a time; any other task's ``build_requests`` over the whole partition. A request
    whose text carries an unfilled placeholder of a syntax its family declares fails the stage
    (``tasks/placeholders.py``).
    """
    frame = _requests(task, key, items)
    family = family_of(task.spec.task)
    check_prompts(task.name, family.spec.placeholders if family else (), frame, items)
    return frame


def _requests(task: LoadedTask, key: EvaluationPartition, items: pl.DataFrame) -> pl.DataFrame:
    if (columnar := columnar_requests(task)) is not None:
        return requests_frame(columnar, key, items, task.params, task.templates)
    if item_local(task):
        batches = iter_records("task_items", items, Item, RECORD_CHUNK)
    else:
        batches = iter([from_frame("task_items", items, Item)])
    requests = (
        chunk for batch in batches for chunk in chunked(task.hooks.build_requests(batch, task.params, task.templates))
    )
    return stage_frame("prompts", key, requests)


def template_hashes(task: LoadedTask) -> dict[str, str]:
    """Each template's sha256, by name (the prompts' reproducibility record)."""
    return {name: task.template_sha256(name) for name in task.templates}
