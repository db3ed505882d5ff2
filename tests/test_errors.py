"""The errors every layer shares: a declaration validated names its origin and every bad field."""

from __future__ import annotations

import pytest
from pydantic import Field

from themis_dagster.errors import ConfigError, StrictModel, validated


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
