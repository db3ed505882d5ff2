"""Finds task files by name, validates them (includes merged) and their parameters, and loads their modules."""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import yaml
from pydantic import ValidationError

from themis_dagster.errors import ConfigError, format_validation_error
from themis_dagster.tasks.declaration import read_declaration
from themis_dagster.tasks.spec import Resend, SecondOpinion, TaskInputs, TaskModule, TaskParams, TaskSpec

TASKS_DIR = Path(__file__).resolve().parent


def takes_inputs(function: object) -> bool:
    """Whether a task function declares the keyword ``inputs`` (a ``TaskInputs``)."""
    if not (inspect.isfunction(function) or inspect.ismethod(function)):
        return False
    return "inputs" in inspect.signature(function).parameters


class _WithInputs:
    """A task's functions, each that declares ``inputs`` called with these; every other attribute as declared."""

    def __init__(self, functions: object, inputs: TaskInputs) -> None:
        self.functions = functions
        self.inputs = inputs

    def __getattr__(self, name: str) -> Any:
        if name in ("functions", "inputs"):  # not set yet (a copy being built): never recurse
            raise AttributeError(name)
        value = getattr(self.functions, name)
        return partial(value, inputs=self.inputs) if takes_inputs(value) else value


@dataclass(frozen=True)
class LoadedTask:
    """A task ready to run: its declaration, functions, validated parameters and templates.

    ``module`` hands ``inputs`` to each of its functions that declares the keyword (``with_inputs``).
    """

    spec: TaskSpec
    module: TaskModule
    params: TaskParams
    templates: dict[str, str]
    source_file: Path
    second_opinion: SecondOpinion | None = None
    resend: Resend | None = None
    inputs: TaskInputs = field(default_factory=TaskInputs)

    def with_inputs(self, inputs: TaskInputs) -> LoadedTask:
        """This task with ``inputs`` supplied to every function of it that declares them."""
        functions = self.module.functions if isinstance(self.module, _WithInputs) else self.module
        return replace(self, module=cast(TaskModule, _WithInputs(functions, inputs)), inputs=inputs)

    @property
    def name(self) -> str:
        return self.spec.task

    @property
    def judge_model(self) -> str | None:
        """The second-opinion judge's model id, when the task declares one and its params name it."""
        return None if self.second_opinion is None else self.second_opinion.judge_model(self.params)

    def template_sha256(self, name: str) -> str:
        return hashlib.sha256(self.templates[name].encode()).hexdigest()


def _task_files(root: Path) -> dict[str, Path]:
    """Task files by the name their own ``task:`` key gives; include-only bases and templates are not tasks."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.yaml")):
        if path.name.endswith("templates.yaml"):
            continue
        raw = yaml.safe_load(path.read_text())
        if not isinstance(raw, dict) or "task" not in raw:
            continue
        name = str(raw["task"])
        if name in found:
            raise ConfigError(f"task {name!r} declared twice: {found[name]} and {path}")
        found[name] = path
    return found


@cache
def task_files(root: Path = TASKS_DIR) -> dict[str, Path]:
    """Every declared task, by name."""
    return _task_files(root)


def task_names(root: Path = TASKS_DIR) -> list[str]:
    return sorted(task_files(root))


def _load_spec(path: Path) -> TaskSpec:
    """The task file's declaration, merged with the files it includes, validated."""
    declaration = read_declaration(path)
    try:
        return TaskSpec.model_validate(declaration.fields)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, declaration.origin)) from None


def _load_templates(spec: TaskSpec, task_file: Path) -> dict[str, str]:
    if spec.templates is None:
        return {}
    path = task_file.parent / spec.templates
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ConfigError(f"{path}: expected a mapping of template name to Jinja2 text")
    return {str(key): value for key, value in raw.items()}


def _task_module(module: ModuleType) -> TaskModule:
    """The module's task functions: its ``TASK`` declaration if it has one, else the module itself."""
    declared = vars(module).get("TASK", module)
    if not isinstance(declared, TaskModule):
        raise ConfigError(
            f"{module.__name__}: expected Params, load_items, build_requests, judge and compute_metrics "
            "(or a TASK object that has them)"
        )
    return declared


def _second_opinion(module: ModuleType) -> SecondOpinion | None:
    """The module's optional ``SECOND_OPINION`` declaration, checked to have the protocol's methods."""
    declared = vars(module).get("SECOND_OPINION")
    if declared is not None and not isinstance(declared, SecondOpinion):
        raise ConfigError(f"{module.__name__}.SECOND_OPINION: expected judge_model, requests and apply methods")
    return declared


def _resend(module: ModuleType) -> Resend | None:
    """The module's optional ``RESEND`` declaration, checked to have the protocol's methods."""
    declared = vars(module).get("RESEND")
    if declared is not None and not isinstance(declared, Resend):
        raise ConfigError(f"{module.__name__}.RESEND: expected rounds and to_resend methods")
    return declared


def check_registered_models(name: str, params: TaskParams, models: Collection[str]) -> None:
    """Fail naming the parameter when the task's parameters name a model the registry lacks."""
    errors = [
        f"task {name} params: {where}: model {model_id!r} is not registered; known: {sorted(models)}"
        for where, model_id in params.registered_models().items()
        if model_id not in models
    ]
    if errors:
        raise ConfigError("\n".join(errors))


def load_task(
    name: str,
    overrides: dict[str, Any] | None = None,
    root: Path = TASKS_DIR,
    *,
    models: Collection[str] | None = None,
) -> LoadedTask:
    """Load a task by name; ``overrides`` replace YAML defaults and are validated the same way.

    ``models``: the registered model ids; given, a model the parameters name (``registered_models``)
    must be one of them.
    """
    files = task_files(root)
    if name not in files:
        raise ConfigError(f"unknown task {name!r}; known tasks: {', '.join(sorted(files))}")
    path = files[name]
    spec = _load_spec(path)
    imported = importlib.import_module(spec.module)
    module = _task_module(imported)
    merged = {**spec.params, **(overrides or {})}
    try:
        params = module.Params.model_validate(merged)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, f"task {name} params")) from None
    if models is not None:
        check_registered_models(name, params, models)
    templates = _load_templates(spec, path)
    return LoadedTask(spec, module, params, templates, path, _second_opinion(imported), _resend(imported))


def tasks_with_local_data(
    names: list[str], datasets_dir: Path, cache_dir: Path, allow_download: bool = False
) -> tuple[list[str], dict[str, str]]:
    """Split tasks into those whose benchmark files can be had and the others.

    By default only files on disk (mirror or cache) count, as sensor and schedule ticks
    must not download; ``themis run`` also tries the canonical URLs. The reason names the
    missing file, every place looked in and the URL.
    """
    from themis_dagster.datasets import DatasetNotFoundError, resolve_file

    ready, missing = [], {}
    for name in names:
        spec = _load_spec(task_files()[name])
        try:
            for file in spec.files:
                resolve_file(
                    spec.dataset, file, datasets_dir=datasets_dir, cache_dir=cache_dir, allow_download=allow_download
                )
        except DatasetNotFoundError as error:
            missing[name] = str(error)
            continue
        ready.append(name)
    return ready, missing


def load_overrides(path: Path | None) -> dict[str, dict[str, Any]]:
    """Read a task-overrides file (``{task: {param: value}}``), checking every task name."""
    if path is None:
        return {}
    if not path.is_file():
        raise ConfigError(f"task overrides file not found: {path}")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of task name to parameters")
    known = task_files()
    for task, values in raw.items():
        if task not in known:
            raise ConfigError(f"{path}: unknown task {task!r}; known tasks: {', '.join(sorted(known))}")
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: {task}: expected a mapping of parameters")
    return {str(task): dict(values) for task, values in raw.items()}
