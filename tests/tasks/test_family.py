"""The family contract: every folder of task files declares its family, and what it declares is checked and used.

``tasks/family.py`` reads each ``tasks/<family>/family.yaml`` once; these tests check the declarations
the repository holds (every task in one family, its sizes valid parameters, its extension points of
the right kind), what the platform derives from them (display groups, run profile, catalogue,
tables), and that an incomplete declaration fails when the definitions load, naming family and field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
import yaml

from themis_dagster.datasets import load_catalog
from themis_dagster.errors import ConfigError
from themis_dagster.reports.summary import FAMILIES, OTHER, benchmark_family
from themis_dagster.tasks.family import (
    SizeKind,
    display_groups,
    extensions,
    family_of,
    load_families,
    resolve,
    settings_metrics,
    sizes,
)
from themis_dagster.tasks.loader import VARIANT_DECLARATION, load_overrides, load_task, task_files, task_names
from themis_dagster.tasks.profile import write_profile
from themis_dagster.tasks.variants import declared_variants, without_perturbations
from themis_dagster.warehouse.tables import TABLES, family_tables

FAMILIES_FOUND = load_families()


def test_every_task_is_in_one_family_and_every_family_declares_itself() -> None:
    tasks = [task for family in FAMILIES_FOUND.values() for task in family.tasks]
    assert sorted(tasks) == task_names()
    for name, family in FAMILIES_FOUND.items():
        assert family.spec.family == name == family.folder.name
        assert all(task_files()[task].parent == family.folder for task in family.tasks)
    assert all(family_of(task) is not None for task in task_names()) and family_of("genderbench") is None
    assert family_of("winogender__gender_swap") == FAMILIES_FOUND["winogender"]  # a variant is its task's
    assert benchmark_family("bbq_generate__gender_swap") == "BBQ"


def test_every_family_shows_under_its_own_display_group_in_order() -> None:
    """No family's task reads as Other; groups come in their declared order, shared ones once."""
    assert {benchmark_family(task) for task in task_names()} == set(display_groups())
    assert OTHER not in display_groups() and (*display_groups(), OTHER) == FAMILIES
    expected = {
        "honest": "HONEST", "winobias": "WinoBias", "stereoset": "StereoSet", "bold": "BOLD",
        "winogender": "Winogender", "holistic_bias": "HolisticBias", "discrim_eval": "DiscrimEval",
        "cabbq_generate": "BBQ", "gb_bbq": "GenderBench", "lm_eval_crows_pairs": "lm-eval tasks",
    }  # fmt: skip
    assert {task: benchmark_family(task) for task in expected} == expected
    orders = [min(f.spec.order for f in FAMILIES_FOUND.values() if f.spec.group == g) for g in display_groups()]
    assert orders == sorted(orders)
    assert display_groups()[:6] == ("CrowS-Pairs", "BBQ", "IAT", "GenderBench", "LangBiTe", "lm-eval tasks")


@pytest.mark.parametrize("kind", get_args(SizeKind))
def test_each_kind_of_size_is_valid_parameters_of_its_task(kind: SizeKind) -> None:
    declared = sizes(kind)
    assert declared, kind
    for task, overrides in declared.items():
        load_task(task, overrides)  # fails naming the parameter, as a bad overrides file does


def test_make_runs_profile_is_written_from_the_families(tmp_path: Path) -> None:
    """An ordinary overrides file (THEMIS_TASK_OVERRIDES) holding every family's run sizes, as declared; the
    perturbations declared there are make run's variants, each with its task's parameters."""
    path = write_profile(tmp_path / "run_profiles" / "default.yaml")
    assert yaml.safe_load(path.read_text()) == sizes("run")
    overrides = load_overrides(path)
    assert {task: overrides[task] for task in sizes("run")} == {
        task: without_perturbations(values) for task, values in sizes("run").items()
    }
    variants = declared_variants(path, task_names())
    assert sorted(variants) == sorted(set(overrides) - set(sizes("run")))
    assert {"bbq_generate__gender_swap", "winogender__gender_swap", "discrim_eval__race_white_black"} <= set(variants)
    for variant, (task, declaration) in variants.items():
        assert overrides[variant] == {**overrides[task], VARIANT_DECLARATION: declaration}
    assert yaml.safe_load(path.read_text())["bold"] == {"limit": 3, "judge_model": "smollm2-135m-instruct"}
    assert set(sizes("run")) == set(task_names())  # make run sizes every task today


def test_the_catalogue_holds_every_familys_dataset_files() -> None:
    catalog = load_catalog()
    for family in FAMILIES_FOUND.values():
        assert {name: catalog[name] for name in family.spec.datasets} == family.spec.datasets
    for task in task_names():
        spec = load_task(task).spec
        assert set(spec.files) <= set(catalog[spec.dataset].files), task


def test_extension_points_resolve_to_what_the_platform_takes() -> None:
    from dagster import AssetsDefinition

    from themis_dagster.assets.families import DatasetInputs, dataset_input_deps, family_assets, is_report
    from themis_dagster.importers import family_importers
    from themis_dagster.tasks.genderbench.core import DEPARTURE_METRIC

    assert all(isinstance(asset, AssetsDefinition) for asset in family_assets())
    assert sorted(a.key.to_user_string() for a in family_assets() if not is_report(a)) == [
        "langbite_augmented_templates"
    ]
    assert all(isinstance(inputs, DatasetInputs) for inputs in extensions("dataset_inputs").values())
    assert [dep.asset_key.to_user_string() for dep in dataset_input_deps()] == ["langbite_augmented_templates"]
    assert {name: spec.column for name, spec in family_importers().items()} == {"bbq": True, "iat": False}
    assert all(callable(resolve(spec.read)) for spec in family_importers().values())
    assert settings_metrics() == {DEPARTURE_METRIC}
    assert set(family_tables()) == {name for name in TABLES if name.startswith("langbite_")}


# -- a declaration that is incomplete or wrong fails when the definitions load -----------------------------


def _family(root: Path, declaration: str | None, tasks: tuple[str, ...] = ("newfam_task",)) -> Path:
    folder = root / "newfam"
    folder.mkdir(parents=True)
    for task in tasks:
        (folder / f"{task}.yaml").write_text(f"task: {task}\n")
    if declaration is not None:
        (folder / "family.yaml").write_text(declaration)
    return root


@pytest.mark.parametrize(
    ("declaration", "field"),
    [
        ("family: newfam\norder: 5\n", "group: Field required"),
        ("family: newfam\ngroup: New\n", "order: Field required"),
        ("group: New\norder: 5\n", "family: Field required"),
        ("family: newfam\ngroup: New\norder: 5\nsizes: {newfam_task: {rn: {limit: 1}}}\n", "sizes.newfam_task.rn"),
        ("family: newfam\ngroup: New\norder: 5\nassets: not a reference\n", "assets: String should match pattern"),
        ("family: newfam\ngroup: New\norder: 5\nimporter: {name: new, read: m:f}\n", "importer.help: Field required"),
        ("family: newfam\ngroup: New\norder: 5\ndatasets: {d: {license: x, files: {}}}\n", "datasets.d.homepage"),
        ("family: newfam\ngroup: New\norder: 5\ntables: {t: {columns: [{name: a, type: TEXTS}]}}\n", "tables.t.col"),
        ("family: other\ngroup: New\norder: 5\n", "family: 'other' is not the folder's name"),
        ("family: newfam\ngroup: New\norder: 5\nsizes: {bbq: {run: {}}}\n", "sizes.bbq: 'bbq' is not a task of this"),
        ("family: newfam\ngroup: New\norder: 5\nsizes: {newfam_task: {run: {perturbations: [gendr_swap]}}}\n",
         "sizes.newfam_task.run.perturbations.0: unknown perturbation 'gendr_swap'"),
        ("family: newfam\ngroup: New\norder: 5\ncalibration_sets: {s: {task: bold, question: q}}\n",
         "calibration_sets.s.task: 'bold' is not a task of this family"),
        (None, "family.yaml is missing: every folder of task files declares its family there"),
    ],
)  # fmt: skip
def test_an_incomplete_declaration_fails_naming_the_family_and_the_field(
    tmp_path: Path, declaration: str | None, field: str
) -> None:
    root = _family(tmp_path, declaration)
    with pytest.raises(ConfigError, match="family 'newfam'") as caught:
        load_families(root)
    assert field in str(caught.value)


def test_the_definitions_check_every_declaration_when_they_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from themis_dagster.definitions import build_definitions

    monkeypatch.setattr("themis_dagster.tasks.family.FAMILIES_DIR", _family(tmp_path, "family: newfam\norder: 5\n"))
    with pytest.raises(ConfigError, match=r"family 'newfam' \(.*family.yaml\): group: Field required"):
        build_definitions()


def test_a_familys_table_that_is_no_table_fails_naming_family_and_field(tmp_path: Path) -> None:
    folder = tmp_path / "newfam"
    folder.mkdir()
    (folder / "family.yaml").write_text("tables: {new_table: {columns: [{name: a, type: TEXT, nullable: true}]}}\n")
    with pytest.raises(ConfigError, match=r"family 'newfam': tables.new_table: columns.0.nullable"):
        family_tables(tmp_path)
    (folder / "family.yaml").write_text("tables: {judgments: {columns: [{name: a, type: TEXT}]}}\n")
    with pytest.raises(ConfigError, match=r"family 'newfam': tables.judgments: a warehouse table of that name"):
        family_tables(tmp_path)


def test_a_familys_dataset_declared_twice_fails(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "family.yaml").write_text(
            "datasets: {shared: {license: x, homepage: y, files: {f.csv: {mirror: a/f.csv, url: 'https://x'}}}}\n"
        )
    with pytest.raises(ValueError, match="dataset 'shared' declared twice in the catalogue \\(family 'two'"):
        load_catalog(tmp_path / "no-catalog-files", tmp_path)


# -- docs/dev/task-authoring.md's role table is the folders' ----------------------------------------------

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "dev" / "task-authoring.md"


def role_table() -> dict[str, set[str]]:
    """The guide's "One name per role" table: file name -> its examples (families, or family/file paths)."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("| file | role | for example |")
    rows = [line for line in text[start:].split("\n\n", 1)[0].splitlines()[2:] if line.startswith("|")]
    table: dict[str, set[str]] = {}
    for row in rows:
        file, _, examples = (cell.strip() for cell in row.strip("|").split(" | "))
        examples = re.sub(r"\([^)]*\)", "", examples)
        listed = {name.strip() for name in examples.split(",") if name.strip()}
        table[file.strip("`")] = set(FAMILIES_FOUND) if examples == "every family" else listed
    return table


def test_the_role_table_is_the_families_files() -> None:
    """Every example holds its row's file; a file name several families use has a row (a new family edits nothing)."""
    table = role_table()
    folders = {name: family.folder for name, family in FAMILIES_FOUND.items()}
    variants = table.pop("<variant>_utils.py")
    assert variants and all((folders[path.split("/")[0]] / path.split("/")[1]).is_file() for path in variants)
    for file, examples in table.items():
        assert examples and all((folders[name] / file).is_file() for name in examples), file
    names = [path.name for folder in folders.values() for path in folder.glob("*.py") if path.name != "__init__.py"]
    recurring = {name for name in names if names.count(name) > 1}
    assert recurring <= set(table), "a file name several families use is a role: give it a row"


def test_the_role_table_names_the_contracts_extension_modules() -> None:
    """The modules a family's extension points name are its role modules, each in its platform role's layer."""
    from tests.assets.test_layers import FAMILY_ROLES

    assert {f"{role}.py" for role in FAMILY_ROLES} <= set(role_table())
    for family in FAMILIES_FOUND.values():
        spec, package = family.spec, f"themis_dagster.tasks.{family.name}"
        for reference, role in ((spec.assets, "assets"), (spec.dataset_inputs, "assets"),
                                (spec.importer.read if spec.importer else None, "importer")):  # fmt: skip
            assert reference is None or reference.partition(":")[0] == f"{package}.{role}", reference
