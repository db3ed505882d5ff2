"""The typed partition key: parsed and checked once, shown as Dagster writes it."""

from __future__ import annotations

import dataclasses

import pytest

from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.partitions import evaluation_key


def test_a_key_is_parsed_and_validated_once_and_reads_as_dagster_writes_it() -> None:
    key = EvaluationPartition.parse("some-model|crows_pairs")
    assert key == EvaluationPartition.validated("some-model", "crows_pairs")
    assert (key.model, key.task, str(key)) == ("some-model", "crows_pairs", "some-model|crows_pairs")
    assert str(key) == str(evaluation_key("some-model", "crows_pairs"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.task = "bbq"  # type: ignore[misc]


def test_a_bad_key_fails_naming_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="invalid model id 'Bad'"):
        EvaluationPartition.parse("Bad|crows_pairs")
    with pytest.raises(ValueError, match="unknown task 'nope'; known tasks: "):
        EvaluationPartition.parse("some-model|nope")
    with pytest.raises(ValueError, match="unknown task ''"):
        EvaluationPartition.parse("some-model")
