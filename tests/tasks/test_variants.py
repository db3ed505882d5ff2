"""Variant partitions declared by a task override's ``perturbations``: names, checks, parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import MIRROR
from themis_dagster.errors import ConfigError
from themis_dagster.perturbations.spec import WordPairsSwap
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.settings import Settings
from themis_dagster.tasks.loader import (
    check_variants,
    evaluation_tasks,
    load_overrides,
    load_task,
    task_names,
    validate_plan,
)
from themis_dagster.tasks.variants import declared_variants, split_variant, variant_name, without_perturbations


def _write(tmp_path: Path, overrides: dict[str, object]) -> Path:
    path = tmp_path / "overrides.yaml"
    path.write_text(yaml.safe_dump(overrides))
    return path


def test_variants_are_named_after_their_task(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text("a,b\nnurse,engineer\n")
    path = _write(tmp_path, {
        "winogender": {"limit": 5, "perturbations": ["gender_swap", "identity"]},
        "bbq_generate": {"perturbations": [{"name": "jobs", "kind": "word_pairs", "path": "jobs.csv"}]},
        "crows_pairs": {"limit": 3},
    })  # fmt: skip
    variants = declared_variants(path, task_names())
    assert sorted(variants) == ["bbq_generate__jobs", "winogender__gender_swap", "winogender__identity"]
    task, declaration = variants["bbq_generate__jobs"]
    assert task == "bbq_generate" and isinstance(declaration, WordPairsSwap)
    assert declaration.path == tmp_path / "jobs.csv"
    assert split_variant("winogender__identity") == ("winogender", "identity")
    assert split_variant("winogender") == ("winogender", None)
    assert variant_name("winogender", "identity") == "winogender__identity"
    assert sorted(["bold", "winogender__identity", "bbq_generate__jobs", "bbq_generate", "winogender"]) == [
        "bbq_generate",
        "bbq_generate__jobs",
        "bold",
        "winogender",
        "winogender__identity",
    ]  # fmt: skip - a variant runs right after its task
    assert without_perturbations({"limit": 5, "perturbations": ["x"]}) == {"limit": 5}
    assert declared_variants(None, task_names()) == {}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"winogender": {"perturbations": ["gendr_swap"]}},
            "winogender.perturbations.0: unknown perturbation 'gendr_swap'",
        ),
        ({"nonesuch": {"perturbations": ["identity"]}}, "unknown task 'nonesuch'"),
        ({"winogender": {"perturbations": [{"kind": "identity"}]}}, "winogender.perturbations.0: name: a declared"),
    ],
)
def test_bad_variants_fail_naming_file_task_and_entry(
    tmp_path: Path, overrides: dict[str, object], message: str
) -> None:
    path = _write(tmp_path, overrides)
    with pytest.raises(ConfigError) as raised:
        declared_variants(path, task_names())
    assert str(path) in str(raised.value) and message in str(raised.value)


def test_a_variant_loads_as_its_task_with_its_perturbation(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text("a,b\nnurse,engineer\n")
    path = _write(tmp_path, {
        "winogender": {"limit": 5, "perturbations": ["identity"]},
        "bbq_generate": {"limit": 2, "perturbations": [{"name": "jobs", "kind": "word_pairs", "path": "jobs.csv"}]},
    })  # fmt: skip
    overrides = load_overrides(path)
    assert overrides["winogender"] == {"limit": 5}  # perturbations declare variants, not a parameter
    variant = load_task("bbq_generate__jobs", overrides.get("bbq_generate__jobs"))
    assert variant.name == "bbq_generate__jobs" and variant.spec.task == "bbq_generate"
    assert variant.params == load_task("bbq_generate", overrides["bbq_generate"]).params
    assert variant.perturbation is not None and variant.perturbation.name == "jobs"
    builtin = load_task("winogender__identity")  # a built-in needs no overrides file
    assert builtin.perturbation is not None and builtin.perturbation.kind == "identity"
    assert load_task("winogender").perturbation is None and load_task("winogender").name == "winogender"
    with pytest.raises(ConfigError, match="unknown task 'winogender__jobs': 'winogender' has no perturbation 'jobs'"):
        load_task("winogender__jobs")
    with pytest.raises(ConfigError, match="unknown task 'nonesuch__identity'"):
        load_task("nonesuch__identity")
    settings = Settings(task_overrides_file=path)
    names = evaluation_tasks(settings)
    assert names == sorted([*task_names(), "winogender__identity", "bbq_generate__jobs"])
    assert names.index("winogender__identity") == names.index("winogender") + 1


def test_the_plan_builds_every_variants_lists_before_any_engine(tmp_path: Path) -> None:
    path = _write(tmp_path, {
        "bbq_generate": {"perturbations": [
            {"name": "faith", "kind": "descriptors", "axis": "religion", "pairs": [["Christian", "Jedi"]]},
        ]},
    })  # fmt: skip
    settings = Settings(task_overrides_file=path, datasets_dir=MIRROR, cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError) as raised:
        check_variants(settings, ["bbq_generate"], load_overrides(path))
    assert str(raised.value) == (
        f"{path}: bbq_generate.perturbations: faith: pairs.0: 'Jedi' is not a descriptor of the 'religion' axis "
        "in descriptors_v1.1.json"
    )
    check_variants(settings, ["winogender"], load_overrides(path))  # other tasks' variants are not built


def test_a_variant_the_overrides_file_does_not_declare_fails_before_any_engine(tmp_path: Path) -> None:
    """Not a partition of the task dimension: ``themis run --task`` names what to declare, and where."""
    path = _write(tmp_path, {"winogender": {"limit": 4, "perturbations": ["gender_swap"]}})
    settings = Settings(task_overrides_file=path, datasets_dir=MIRROR, cache_dir=tmp_path / "cache")
    validate_plan(settings, DEFAULT_MODEL_ID, ["winogender", "winogender__gender_swap"])
    with pytest.raises(ConfigError) as raised:
        validate_plan(settings, DEFAULT_MODEL_ID, ["winogender__identity"])
    assert str(raised.value) == (
        f"task 'winogender__identity' is not a partition: a variant runs where the task overrides file declares it "
        f"({path}); add 'identity' to winogender.perturbations there"
    )
