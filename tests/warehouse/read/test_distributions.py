"""One item's distribution beside its references, read by the keys a family's figure names (detail, then fields)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.warehouse.read.handmade import write_partition
from themis_dagster.tasks.spec import Item, Judgment
from themis_dagster.warehouse.read.distributions import aligned, distribution_items, item_distribution

KEYS = {"model": "d_model", "references": "human", "labels": "options", "question": "question"}
OPTIONS = ["Safer", "More dangerous", "Neither", "Refused"]


@pytest.fixture
def conn(tmp_path: Path):  # type: ignore[no-untyped-def]
    items = [
        Item("q1", "guns", {"question": "Safer or more dangerous?", "options": OPTIONS,
                            "human": {"Overall": [0.25, 0.5, 0.25], "G=x": {"Safer": 1.0}}}),
        Item("q2", "guns", {"question": "Unparsed", "options": OPTIONS, "human": {}}),
        Item("q3", None, {"options": ["A", "B"]}),
    ]  # fmt: skip
    judged = [
        Judgment("q1", "guns", "scored", 0.9, True, {"d_model": [2 / 9, 5 / 9, 2 / 9], "refusal": 0.1}),
        Judgment("q2", "guns", "missing_response", None, False, {"d_model": [1.0]}),  # not parsed: not listed
        Judgment("q3", None, "scored", 0.5, True, {"d_model": {"B": 0.75, "A": 0.25}, "human": {"r": [1, 0]}}),
    ]
    path = write_partition(tmp_path / "w.duckdb", "m", "opinions", items=items, judgments=judged)
    write_partition(path, "m", "other", judgments=[Judgment("x", None, "scored", 1.0, True, {"score": 1})])
    with duckdb.connect(str(path), read_only=True) as connection:
        yield connection


def test_the_items_that_hold_a_distribution_titled_by_their_question(conn: duckdb.DuckDBPyConnection) -> None:
    found = distribution_items(conn, "m", "opinions", "d_model", "question")
    assert [(i.item_id, i.subset, i.question) for i in found] == [
        ("q1", "guns", "Safer or more dangerous?"),
        ("q3", None, None),
    ]
    assert [i.question for i in distribution_items(conn, "m", "opinions", "d_model")] == [None, None]
    assert distribution_items(conn, "m", "other", "d_model") == []
    with pytest.raises(ValueError, match="not a key"):
        distribution_items(conn, "m", "opinions", "d_model'); DROP TABLE judgments; --")


def test_a_list_covers_the_first_labels_and_a_mapping_names_them(conn: duckdb.DuckDBPyConnection) -> None:
    first = item_distribution(conn, "m", "opinions", "q1", KEYS)
    assert first is not None and first.question == "Safer or more dangerous?"
    assert first.labels == OPTIONS[:3]  # the model's covers the ordinal options: Refused apart
    assert first.model == pytest.approx([2 / 9, 5 / 9, 2 / 9])
    assert first.references == {"Overall": [0.25, 0.5, 0.25], "G=x": [1.0, None, None]}
    third = item_distribution(conn, "m", "opinions", "q3", KEYS)  # detail wins over fields for a key in both
    assert third is not None and third.labels == ["A", "B"] and third.model == [0.25, 0.75]
    assert third.references == {"r": [1.0, 0.0]}
    assert item_distribution(conn, "m", "opinions", "nope", KEYS) is None


def test_aligned_reads_lists_by_position_and_mappings_by_label() -> None:
    assert aligned([0.5, 0.5], ["a", "b", "c"]) == [0.5, 0.5, None]
    assert aligned({"b": 1, "z": 2}, ["a", "b"]) == [None, 1.0]
    assert aligned("garbage", ["a"]) == [None]
