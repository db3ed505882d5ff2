"""The errors every layer shares: a declaration validated names its origin and every bad field."""

from __future__ import annotations

from typing import Literal

import pytest
import yaml
from pydantic import Field, TypeAdapter

from themis_dagster.errors import ConfigError, StrictModel, load_yaml, validated
from themis_dagster.settings import PROJECT_ROOT


class Declared(StrictModel):
    name: str
    size: int = Field(default=1, ge=1)


def test_valid_data_comes_back_as_the_model() -> None:
    assert validated(Declared, {"name": "a", "size": 3}, "file.yaml") == Declared(name="a", size=3)


def test_every_bad_field_is_named_with_the_origin() -> None:
    with pytest.raises(ConfigError) as raised:
        validated(Declared, {"size": 0, "sise": 2}, "file.yaml: entry")
    lines = str(raised.value).splitlines()
    assert [line.split(": ")[:3] for line in lines] == [
        ["file.yaml", "entry", "name"],
        ["file.yaml", "entry", "size"],
        ["file.yaml", "entry", "sise"],
    ]
    assert raised.value.__cause__ is None  # the pydantic traceback is not chained onto the user's error


class Other(StrictModel):
    kind: Literal["other"]
    weight: float = Field(ge=0)


class ReaderError(ValueError):
    """A reader's own error type (LangBiTe's scenario and library readers raise theirs)."""


def test_a_union_is_validated_through_its_type_adapter_and_a_reader_names_its_error() -> None:
    either: TypeAdapter[Declared | Other] = TypeAdapter(Declared | Other)
    assert validated(either, {"kind": "other", "weight": 0.5}, "file.yaml") == Other(kind="other", weight=0.5)
    with pytest.raises(ReaderError, match=r"^scenario: ") as raised:
        validated(Other, {"kind": "other", "weight": -1}, "scenario", error=ReaderError)
    assert "scenario: weight: " in str(raised.value) and raised.value.__cause__ is None


def test_every_yaml_file_of_the_project_reads_as_yaml_safe_load_reads_it() -> None:
    """``load_yaml`` (libyaml's parser) gives the documents PyYAML's own safe loader gives, on every file we ship."""
    shipped = (PROJECT_ROOT / "themis_dagster").rglob("*.yaml")
    files = sorted([*shipped, *(PROJECT_ROOT / "data").glob("*.yaml"), *(PROJECT_ROOT / "data").glob("*/*.yaml")])
    assert len(files) > 50
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert load_yaml(text) == yaml.safe_load(text), path
    assert yaml.__with_libyaml__  # the pinned PyYAML wheel carries libyaml: the fast parser is the one used


def test_a_bad_yaml_document_raises_yaml_s_own_error() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml("task: [unclosed")
