"""Stage 2, ``prompts``: one row per engine request, rendered from the partition's items.

A variant partition's requests are its task's, every text rewritten by its perturbation (``variants.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.stage_io import RECORD_CHUNK, chunked, stage_frame
from themis_dagster.evaluation.task_frames import columnar_requests, item_local, requests_frame
from themis_dagster.evaluation.variants import perturbed_prompts
from themis_dagster.tasks.family import family_of
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.placeholders import check_prompts
from themis_dagster.tasks.spec import Item
from themis_dagster.warehouse.frames import from_frame, iter_records


@dataclass(frozen=True)
class Rendered:
    """A partition's prompts, and for a variant what its perturbation changed (``perturb_frame``'s counts)."""

    frame: pl.DataFrame
    perturbed: dict[str, int] | None


def render_partition(task: LoadedTask, key: EvaluationPartition, items: pl.DataFrame) -> Rendered:
    """The partition's prompts (``render_prompts``) and, for a variant, the items and requests it rewrote."""
    frame, counts = perturbed_prompts(task, _rendered(task, key, items))
    family = family_of(task.spec.task)  # the text sent, a variant's after its rewrite, checked for holes
    check_prompts(task.name, family.spec.placeholders if family else (), frame, items)
    return Rendered(frame, counts)


def render_prompts(task: LoadedTask, key: EvaluationPartition, items: pl.DataFrame) -> pl.DataFrame:
    """The partition's ``prompts`` frame from its ``task_items`` frame (a variant's rewritten by its perturbation).

    An item-local task's ``build_requests_frame`` a column at a time, or its ``build_requests`` a
    chunk of items at a time; any other task's ``build_requests`` over the whole partition. A request
    whose text carries an unfilled placeholder of a syntax its family declares fails the stage
    (``tasks/placeholders.py``).
    """
    return render_partition(task, key, items).frame


def _rendered(task: LoadedTask, key: EvaluationPartition, items: pl.DataFrame) -> pl.DataFrame:
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
