"""Builds lm-eval task objects for the bridge: local task folders with their data files resolved.

lm-eval (0.4.13) finds tasks through ``lm_eval.tasks.TaskManager``: by registry name (its
own ``lm_eval/tasks`` tree plus any ``include_path``) or by the path of a task YAML. Local
task YAMLs may name benchmark files as ``{{DATA_FILE:<dataset>/<file>}}``; such a folder
is copied once into a content-addressed temp folder with each placeholder replaced by the
file's path from our dataset resolver (mirror, then cache), so task YAMLs never hold
machine paths and the data stays where the catalogue says.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from themis_dagster.settings import PROJECT_ROOT
from themis_dagster.tasks.dataset_files import task_file
from themis_dagster.tasks.spec import TaskInputs

if TYPE_CHECKING:
    from lm_eval.api.task import Task
    from lm_eval.tasks import TaskManager

PLACEHOLDER = re.compile(r"\{\{DATA_FILE:([A-Za-z0-9_.-]+)/([^{}/]+)\}\}")
STAGING_ROOT = Path(tempfile.gettempdir()) / "themis_lm_eval_tasks"
_YAML_SUFFIXES = (".yaml", ".yml")
_QUIET_LOGGERS = ("lm_eval", "datasets", "fsspec", "huggingface_hub")


@contextmanager
def quiet() -> Iterator[None]:
    """lm-eval and datasets log at INFO/WARNING and draw progress bars; hush them while we call them."""
    import datasets

    # setLevel clears the cache of every logger in the process: only loggers not hushed yet are touched,
    # so a nested or repeated hush costs nothing.
    loud = [
        (logger, logger.level) for logger in map(logging.getLogger, _QUIET_LOGGERS) if logger.level != logging.ERROR
    ]
    bars = datasets.is_progress_bar_enabled()
    for logger, _ in loud:
        logger.setLevel(logging.ERROR)
    if bars:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        for logger, level in loud:
            logger.setLevel(level)
        if bars:
            datasets.enable_progress_bars()


def project_path(path: str | Path) -> Path:
    """A path relative to the project root (or absolute), resolved."""
    candidate = Path(path).expanduser()
    return (candidate if candidate.is_absolute() else PROJECT_ROOT / candidate).resolve()


def resolve_data_file(dataset: str, name: str, files: Mapping[str, Path], inputs: TaskInputs | None = None) -> Path:
    """The file the asset already resolved (``files``), else the resolver's mirror or cache copy (``inputs``'
    directories; never downloaded)."""
    return Path(task_file(dataset, name, files, inputs, allow_download=False)).resolve()


def _folder_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def stage(folder: Path, files: Mapping[str, Path], inputs: TaskInputs | None = None) -> Path:
    """``folder`` itself when no YAML in it has a placeholder, else its instantiated copy.

    The copy lives under a digest of the folder's contents and the substituted paths, so
    repeated calls reuse it (lm-eval then reuses the already imported ``utils`` module).
    """
    texts = {p: p.read_text() for p in _folder_files(folder) if p.suffix in _YAML_SUFFIXES}
    tokens = {m.group(0): (m.group(1), m.group(2)) for text in texts.values() for m in PLACEHOLDER.finditer(text)}
    if not tokens:
        return folder
    paths = {token: str(resolve_data_file(dataset, name, files, inputs)) for token, (dataset, name) in tokens.items()}
    digest = hashlib.sha256(json.dumps(sorted(paths.items())).encode())
    for path in _folder_files(folder):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    target = STAGING_ROOT / digest.hexdigest()[:20]
    if not (target / folder.name).is_dir():
        STAGING_ROOT.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".staging-", dir=STAGING_ROOT))
        shutil.copytree(folder, scratch / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
        for source, text in texts.items():
            for token, value in paths.items():
                text = text.replace(token, value)
            (scratch / folder.name / source.relative_to(folder)).write_text(text)
        try:
            os.rename(scratch, target)
        except OSError:  # another process staged the same content first
            shutil.rmtree(scratch, ignore_errors=True)
    return target / folder.name


@lru_cache(maxsize=8)
def _manager(include: tuple[str, ...], include_defaults: bool, metadata_json: str) -> TaskManager:
    """Indexing lm-eval's own task tree takes seconds; build one manager per include set."""
    from lm_eval.tasks import TaskManager

    with quiet():
        return TaskManager(
            include_path=list(include) or None,
            include_defaults=include_defaults,
            metadata=json.loads(metadata_json) or None,
        )


def task_manager(include: list[Path], include_defaults: bool, metadata: Mapping[str, Any]) -> TaskManager:
    return _manager(tuple(str(p) for p in include), include_defaults, json.dumps(dict(metadata), sort_keys=True))


def load_one_task(manager: TaskManager, spec: str) -> Task:
    """The single lm-eval task that ``spec`` (a registry name or a YAML path) names."""
    with quiet():
        loaded = manager.load([spec])
    tasks = loaded["tasks"]
    if len(tasks) != 1:
        names = ", ".join(sorted(tasks))
        raise ValueError(f"lm-eval spec {spec!r} is a group or tag of {len(tasks)} tasks; name one of them: {names}")
    return next(iter(tasks.values()))


def yaml_sha256(task: Task) -> str | None:
    """sha256 of the YAML file the task was built from (its ``config_source``), if it is a file."""
    source = (task.config.metadata or {}).get("config_source") if isinstance(task.config.metadata, dict) else None
    if not source or not Path(str(source)).is_file():
        return None
    return hashlib.sha256(Path(str(source)).read_bytes()).hexdigest()
