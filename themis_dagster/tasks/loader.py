"""Finds task files by name, validates them (includes merged) and their parameters, and loads their modules."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import inspect
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cache, partial
from pathlib import Path
from types import ModuleType
from typing import Any

from themis_dagster.engines.precision import check_batch_invariant, this_gpu, wants_batch_invariant
from themis_dagster.errors import ConfigError, load_yaml, validated
from themis_dagster.perturbations import Declaration, Mirror, build, builtin_perturbations
from themis_dagster.registry.models import get_model, load_registry
from themis_dagster.settings import Settings
from themis_dagster.tasks.declaration import read_declaration
from themis_dagster.tasks.spec import (
    HOOKS,
    REQUIRED_HOOKS,
    CalibratedJudge,
    JudgePanel,
    MarkScale,
    Resend,
    SecondOpinion,
    TaskHooks,
    TaskInputs,
    TaskParams,
    TaskSpec,
)
from themis_dagster.tasks.variants import declared_variants, split_variant, variant_name, without_perturbations

TASKS_DIR = Path(__file__).resolve().parent
VARIANT_DECLARATION = "__perturbation__"


def takes_inputs(function: object) -> bool:
    """Whether a task function declares the keyword ``inputs`` (a ``TaskInputs``)."""
    if not (inspect.isfunction(function) or inspect.ismethod(function)):
        return False
    return "inputs" in inspect.signature(function).parameters


def bind_inputs(hooks: TaskHooks, inputs: TaskInputs) -> TaskHooks:
    """``hooks`` with ``inputs`` bound into each hook function that declares the keyword."""
    bound: dict[str, Any] = {
        hook.name: partial(value, inputs=inputs)
        for hook in fields(hooks)
        if takes_inputs(value := getattr(hooks, hook.name))
    }
    return replace(hooks, **bound)


@dataclass(frozen=True)
class LoadedTask:
    """A task ready to run: its declaration, hooks, validated parameters and templates.

    ``hooks`` hand ``inputs`` to each function that declares the keyword (``with_inputs``).
    """

    spec: TaskSpec
    hooks: TaskHooks
    params: TaskParams
    templates: dict[str, str]
    source_file: Path
    inputs: TaskInputs = field(default_factory=TaskInputs)
    declared: TaskHooks | None = None
    """The hooks as the module declares them, before ``with_inputs`` bound any (None: ``hooks`` are those)."""
    perturbation: Declaration | None = None
    """A variant's perturbation (``tasks/variants.py``): its rendered prompts are rewritten before the engine."""

    def with_inputs(self, inputs: TaskInputs) -> LoadedTask:
        """This task with ``inputs`` supplied to every function of it that declares them."""
        declared = self.declared or self.hooks
        return replace(self, hooks=bind_inputs(declared, inputs), inputs=inputs, declared=declared)

    @property
    def name(self) -> str:
        """The partition's task: the task's own name, or its variant's (``<task>__<perturbation>``)."""
        return variant_name(self.spec.task, self.perturbation.name) if self.perturbation else self.spec.task

    @property
    def module(self) -> TaskHooks:
        """The hooks, by the name callers used before ``hooks`` (``task.module.judge(...)``); prefer ``hooks``."""
        return self.hooks

    @property
    def second_opinion(self) -> SecondOpinion | None:
        """The task's ``SECOND_OPINION`` hook, if it declares one."""
        return self.hooks.SECOND_OPINION

    @property
    def resend(self) -> Resend | None:
        """The task's ``RESEND`` hook, if it declares one."""
        return self.hooks.RESEND

    @property
    def judge_model(self) -> str | None:
        """The second-opinion judge's model id, when the task declares one and its params name it."""
        return None if self.second_opinion is None else self.second_opinion.judge_model(self.params)

    @property
    def judge_panel(self) -> JudgePanel | None:
        """The ``SECOND_OPINION`` as a panel of judges, where it is one (the contract's ``JudgePanel``)."""
        opinion = self.second_opinion
        return opinion if isinstance(opinion, JudgePanel) else None

    @property
    def calibrated_judge(self) -> CalibratedJudge | None:
        """The ``SECOND_OPINION`` as a judge whose labels can be calibrated (the contract's ``CalibratedJudge``)."""
        opinion = self.second_opinion
        return opinion if isinstance(opinion, CalibratedJudge) else None

    @property
    def judges(self) -> tuple[str, ...]:
        """Every model the second opinion asks with these params: a panel's judges (``judge_model`` first),
        else the one ``judge_model``; none when the params name no judge."""
        if not self.judge_model:
            return ()
        panel = self.judge_panel
        return panel.judges(self.params) if panel is not None else (self.judge_model,)

    @property
    def verdict_by_majority(self) -> bool:
        """Whether a panel's majority label is the verdict (``JudgePanel.verdict_by_majority``)."""
        panel = self.judge_panel
        return panel is not None and panel.verdict_by_majority(self.params)

    def template_sha256(self, name: str) -> str:
        return hashlib.sha256(self.templates[name].encode()).hexdigest()


def _task_files(root: Path) -> dict[str, Path]:
    """Task files by the name their own ``task:`` key gives; include-only bases and templates are not tasks."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.yaml")):
        if path.name.endswith("templates.yaml"):
            continue
        raw = load_yaml(path.read_text())
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
    return validated(TaskSpec, declaration.fields, declaration.origin)


def _load_templates(spec: TaskSpec, task_file: Path) -> dict[str, str]:
    if spec.templates is None:
        return {}
    path = task_file.parent / spec.templates
    raw = load_yaml(path.read_text())
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ConfigError(f"{path}: expected a mapping of template name to Jinja2 text")
    return {str(key): value for key, value in raw.items()}


def _is_params(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, TaskParams)


def _is_paired_metrics(value: Any) -> bool:
    return callable(getattr(value, "get", None))


def _are_marks(value: Any) -> bool:
    return isinstance(value, tuple | list) and all(isinstance(mark, MarkScale) for mark in value)


_STAGES = ("load_items", "build_requests", "judge", "compute_metrics")
"""The chain's stages: each hook is a function, row-at-a-time (``judge``) or column-at-a-time (``judge_frame``)."""
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "Params": (_is_params, "a TaskParams subclass"),
    **{hook: (callable, "a function") for stage in _STAGES for hook in (stage, f"{stage}_frame")},
    "ITEM_LOCAL": (lambda value: isinstance(value, bool), "True or False"),
    "PAIRED_METRICS": (_is_paired_metrics, "a mapping of metric name to PairedMeasure (anything with .get(metric))"),
    "SECOND_OPINION": (lambda value: isinstance(value, SecondOpinion), "judge_model, requests and apply methods"),
    "RESEND": (lambda value: isinstance(value, Resend), "rounds and to_resend methods"),
    "marks": (_are_marks, "a sequence of mark definitions (metric, ranges, overall_range)"),
}
_UPPER_HOOKS = tuple(hook for hook in (*HOOKS, "TASK") if hook.isupper())


def _public_names(declared: Any) -> set[str]:
    names = vars(declared) if isinstance(declared, ModuleType) else {name: None for name in dir(declared)}
    return {name for name in names if not name.startswith("_")}


def _near_miss(name: str) -> str | None:
    """The UPPERCASE hook an UPPERCASE name that is none looks like a misspelling of (``PAIRED_METRIC``)."""
    if not name.isupper() or name in _UPPER_HOOKS:
        return None
    close = difflib.get_close_matches(name, _UPPER_HOOKS, n=1, cutoff=0.8)
    return close[0] if close else None


def resolve_hooks(module: ModuleType, task: str) -> TaskHooks:
    """The module's hooks (``TaskModule`` in tasks/spec.py), resolved once and checked.

    Read from the module's ``TASK`` object when it declares one, else from the module. Fails
    with a ConfigError naming the task, the module and the hook when a required hook is
    missing, a hook has the wrong type, an optional hook sits in a module beside ``TASK`` (it
    would be ignored), or an UPPERCASE name looks like a misspelt hook.
    """
    declared = vars(module).get("TASK", module)
    where = module.__name__ if declared is module else f"{module.__name__}.TASK"
    missing = [hook for hook in REQUIRED_HOOKS if getattr(declared, hook, None) is None]
    if missing:
        raise ConfigError(
            f"task {task!r}: {where}: missing the required hook(s) {', '.join(missing)} (a task module provides "
            "Params, load_items, build_requests, judge and compute_metrics, or a TASK object that has them)"
        )
    beside = sorted(set(HOOKS).difference(REQUIRED_HOOKS).intersection(vars(module))) if declared is not module else []
    if beside:
        raise ConfigError(
            f"task {task!r}: {module.__name__}.{beside[0]}: declare it on {where}, which provides the task's hooks"
        )
    found: dict[str, Any] = {}
    for hook in HOOKS:
        value = getattr(declared, hook, None)
        if value is None:
            continue
        check, expected = _CHECKS[hook]
        if not check(value):
            raise ConfigError(
                f"task {task!r}: {where}.{hook}: expected {expected}, got {type(value).__name__} {value!r:.80}"
            )
        found[hook] = value
    for owner, scope in {where: declared, module.__name__: module}.items():
        for name in sorted(_public_names(scope)):
            if (meant := _near_miss(name)) is not None:
                raise ConfigError(f"task {task!r}: {owner}.{name}: not a task hook; did you mean {meant}?")
    return TaskHooks(**found)


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
    """Load a task by name; ``overrides`` replace YAML defaults and are validated the same way (their
    ``perturbations``, which declare the task's variants, are no parameter of it).

    ``models``: the registered model ids; given, a model the parameters name (``registered_models``)
    must be one of them.
    """
    files = task_files(root)
    base, perturbation = split_variant(name)
    if perturbation is not None and base in files:
        declared = (overrides or {}).get(VARIANT_DECLARATION)
        return _load_variant(name, perturbation, declared, load_task(base, overrides, root, models=models))
    if name not in files:
        raise ConfigError(f"unknown task {name!r}; known tasks: {', '.join(sorted(files))}")
    path = files[name]
    spec = _load_spec(path)
    hooks = resolve_hooks(importlib.import_module(spec.module), name)
    given = without_perturbations(overrides or {})  # an override's perturbations declare variants, not a parameter
    merged = {**spec.params, **{key: value for key, value in given.items() if key != VARIANT_DECLARATION}}
    params = validated(hooks.Params, merged, f"task {name} params")
    if models is not None:
        check_registered_models(name, params, models)
    templates = _load_templates(spec, path)
    return LoadedTask(spec, hooks, params, templates, path)


def _load_variant(name: str, perturbation: str, declared: Declaration | None, task: LoadedTask) -> LoadedTask:
    """``task`` with its perturbation: declared in the overrides (``load_overrides`` hands it in), else a built-in."""
    declaration = declared or builtin_perturbations().get(perturbation)
    if declaration is None or declaration.name != perturbation:
        raise ConfigError(
            f"unknown task {name!r}: {task.name!r} has no perturbation {perturbation!r} (declare it under the "
            f"task's 'perturbations' in the overrides file, or use a built-in: {', '.join(builtin_perturbations())})"
        )
    return replace(task, perturbation=declaration)


def evaluation_tasks(settings: Settings | None = None) -> list[str]:
    """Every partition of the task dimension: the declared tasks and the variants the overrides file declares."""
    path = (settings or Settings.from_env()).task_overrides_file
    return sorted([*task_names(), *declared_variants(path, task_names())])


def validate_plan(settings: Settings, model_id: str, tasks: Sequence[str]) -> None:
    """Fail fast, before any engine starts: models file, model id, task names and parameters."""
    models = load_registry(settings.models_file, settings.discovered_models_file)
    engaged = [get_model(models, model_id)]
    overrides = load_overrides(settings.task_overrides_file)
    check_partitions(settings, tasks)
    for task in tasks:
        if judge_model := load_task(task, overrides.get(task), models=models).judge_model:
            engaged.append(get_model(models, judge_model))
    for spec in engaged:  # settings this device cannot honour (engines/precision.py)
        if wants_batch_invariant(spec):
            check_batch_invariant(spec, this_gpu())
    check_variants(settings, [split_variant(task)[0] for task in tasks], overrides)


def check_partitions(settings: Settings, tasks: Sequence[str]) -> None:
    """A variant is a partition only where the task overrides file declares it: fail before any engine otherwise."""
    declared = set(evaluation_tasks(settings))
    for task in tasks:
        base, perturbation = split_variant(task)
        if perturbation is not None and task not in declared and base in task_files():
            where = settings.task_overrides_file or "no task overrides file (THEMIS_TASK_OVERRIDES)"
            raise ConfigError(
                f"task {task!r} is not a partition: a variant runs where the task overrides file declares it "
                f"({where}); add {perturbation!r} to {base}.perturbations there"
            )


def check_variants(settings: Settings, tasks: Sequence[str], overrides: dict[str, dict[str, Any]]) -> None:
    """Every perturbation the tasks' variants declare, built from its lists: a bad list or descriptor fails here."""
    mirror = Mirror(settings.datasets_dir, settings.cache_dir)
    for name, values in overrides.items():
        declaration = values.get(VARIANT_DECLARATION)
        if declaration is not None and split_variant(name)[0] in tasks:
            build(declaration, mirror, f"{settings.task_overrides_file}: {split_variant(name)[0]}.perturbations")


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
        spec = _load_spec(task_files()[split_variant(name)[0]])  # a variant reads its task's files
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
    """Read a task-overrides file (``{task: {param: value}}``), checking every task name.

    A task's ``perturbations`` declare its variants (``tasks/variants.py``): each variant gets the
    task's parameters and, under ``VARIANT_DECLARATION``, its perturbation, which ``load_task`` takes.
    """
    if path is None:
        return {}
    if not path.is_file():
        raise ConfigError(f"task overrides file not found: {path}")
    raw = load_yaml(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of task name to parameters")
    known = task_files()
    for task, values in raw.items():
        if task not in known:
            raise ConfigError(f"{path}: unknown task {task!r}; known tasks: {', '.join(sorted(known))}")
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: {task}: expected a mapping of parameters")
    overrides = {str(task): without_perturbations(dict(values)) for task, values in raw.items()}
    for variant, (task, declaration) in declared_variants(path, list(known)).items():
        overrides[variant] = {**overrides[task], VARIANT_DECLARATION: declaration}  # load_task takes it out
    return overrides
