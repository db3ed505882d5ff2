"""A task's dataset files at load or judging time: the ones its asset already resolved, else found through the
datasets catalog in the directories the stage supplied (``TaskInputs``): the mirror, the cache, then the file's
canonical URL where downloads are allowed. Every family that reads a file past its task's list finds it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from themis_dagster.tasks.spec import TaskInputs

if TYPE_CHECKING:
    from themis_dagster.datasets import ResolvedFile


def resolve_dataset_file(
    dataset: str, name: str, inputs: TaskInputs | None, *, allow_download: bool | None = None
) -> ResolvedFile:
    """``dataset/name`` through the catalog in ``inputs``' directories (failing clearly where a caller supplied
    none); fetched when missing only where ``allow_download`` (None: ``inputs.allow_downloads``) says so."""
    from themis_dagster.datasets import resolve_file

    given = inputs or TaskInputs()
    datasets_dir, cache_dir = given.directories()
    download = given.allow_downloads if allow_download is None else allow_download
    return resolve_file(dataset, name, datasets_dir=datasets_dir, cache_dir=cache_dir, allow_download=download)


def task_file(
    dataset: str,
    name: str,
    files: Mapping[str, Path],
    inputs: TaskInputs | None,
    *,
    allow_download: bool | None = None,
) -> Path:
    """The file ``name`` as the task's asset resolved it (``files``), else :func:`resolve_dataset_file`'s."""
    if name in files:
        return files[name]
    return resolve_dataset_file(dataset, name, inputs, allow_download=allow_download).path
