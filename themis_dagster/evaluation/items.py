"""Stage 1, ``task_items``: the task's benchmark items, from its dataset files resolved to paths."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from themis_dagster.datasets import ResolvedFile
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.stage_io import chunked, stage_frame
from themis_dagster.evaluation.task_frames import columnar_items, items_frame
from themis_dagster.tasks.loader import LoadedTask


def dataset_sha256(files: Mapping[str, ResolvedFile]) -> str:
    """The items' dataset version: every file's sha256, in the task file's order, joined by ``+``."""
    return "+".join(f.sha256 for f in files.values())


def load_items(task: LoadedTask, key: EvaluationPartition, files: Mapping[str, ResolvedFile]) -> pl.DataFrame:
    """The partition's ``task_items`` frame: ``load_items_frame`` a column at a time where the task offers it,
    else ``load_items``' records a chunk at a time (a task may return a generator)."""
    paths = {name: f.path for name, f in files.items()}
    combined_sha = dataset_sha256(files)
    if (columnar := columnar_items(task)) is not None:
        return items_frame(columnar, key, paths, task.params, combined_sha)
    items = task.hooks.load_items(paths, task.params)
    return stage_frame("task_items", key, chunked(items), dataset_sha256=combined_sha)
