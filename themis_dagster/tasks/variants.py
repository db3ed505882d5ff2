"""Variant partitions: a task with a perturbation, named ``<task>__<perturbation>`` in the task dimension.

A task override may name ``perturbations`` (docs/counterfactuals.md); each becomes a variant
of that task: the same items, parameters and ids, its rendered prompts rewritten before the
engine sees them. The variants are read from the overrides file with the tasks, so they are
partitions like any task's and run after their task (``sorted`` puts ``bbq_generate__gender_swap``
right after ``bbq_generate``). A bad entry fails when the definitions load, naming the file,
the task and the entry's index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from themis_dagster.errors import ConfigError, load_yaml
from themis_dagster.perturbations import Declaration, parse_perturbations

SEPARATOR = "__"
KEY = "perturbations"
MAX_NAME = 48  # the task partition key's limit (TaskSpec.task)


def split_variant(name: str) -> tuple[str, str | None]:
    """(task, perturbation) of a variant's name; (name, None) for a task's own."""
    task, separator, perturbation = name.partition(SEPARATOR)
    return (task, perturbation) if separator else (name, None)


def variant_name(task: str, perturbation: str) -> str:
    return f"{task}{SEPARATOR}{perturbation}"


def declared_variants(path: Path | None, tasks: list[str]) -> dict[str, tuple[str, Declaration]]:
    """Every variant the overrides file ``path`` declares: its name -> (task, perturbation declaration).

    ``tasks``: the declared task names (a variant of any other fails, as an override of it does).
    """
    if path is None or not path.is_file():
        return {}
    raw: Any = load_yaml(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, dict):
        return {}  # load_overrides names this error
    variants: dict[str, tuple[str, Declaration]] = {}
    for task, values in raw.items():
        if not isinstance(values, dict) or KEY not in values:
            continue
        origin = f"{path}: {task}.{KEY}"
        if task not in tasks:
            raise ConfigError(f"{path}: unknown task {task!r}; known tasks: {', '.join(sorted(tasks))}")
        for index, declaration in enumerate(parse_perturbations(values[KEY], origin, path.parent)):
            name = variant_name(str(task), declaration.name)
            if len(name) > MAX_NAME:
                raise ConfigError(
                    f"{origin}.{index}: {name!r} is longer than {MAX_NAME} characters; give the perturbation a "
                    "shorter name"
                )
            variants[name] = (str(task), declaration)
    return variants


def without_perturbations(overrides: dict[str, Any]) -> dict[str, Any]:
    """A task's overrides less ``perturbations``, which declares its variants rather than a parameter."""
    return {key: value for key, value in overrides.items() if key != KEY}
