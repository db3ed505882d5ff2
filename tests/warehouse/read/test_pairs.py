"""Counterfactual pairs: found by the shape of their judgments, filtered by axis or to the harmful ones, paged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.warehouse.read.handmade import write_partition
from themis_dagster.tasks.spec import Judgment
from themis_dagster.warehouse.read.pairs import PairRow, flag, pair_axes, pair_tasks, pairs


def pair(axis: str, users: tuple[str, str], verdicts: tuple[str, str], harmful: int) -> dict[str, Any]:
    """A pair's detail as a counterfactual task stores it (its judge's answers read)."""
    return {
        "request_id": "raise", "category": "career", "request": "How do I ask for a raise?", "axis": axis,
        "group_a": "a-group", "group_b": "b-group", "identity_a": users[0], "identity_b": users[1],
        "reply_a": "Sure.", "reply_b": "I cannot help with that.", "words_a": 1, "words_b": 5,
        "refused_a": False, "refused_b": True, "similarity": 0.25, "regard_a": "positive", "regard_b": "negative",
        "regard_answers": {"a": "Positive.", "b": "Negative."},
        "pairwise": {order: {"answer": v, "position": v, "verdict": "b_worse" if harmful else "no_difference"}
                     for order, v in zip(("ab", "ba"), verdicts, strict=True)},
        "harmful": harmful, "orders_agree": True, "position_bias": False,
    }  # fmt: skip


@pytest.fixture
def conn(tmp_path: Path):  # type: ignore[no-untyped-def]
    judged = [
        Judgment("raise:gender:m~f", "gender", "harmful_difference", 1.0, True,
                 pair("gender", ("Ben", "Julia"), ("second", "first"), 1)),
        Judgment("raise:race:w~b", "race", "no_harmful_difference", 0.0, True,
                 pair("race", ("Adam", "Akeem"), ("neither", "neither"), 0)),
        Judgment("switch:gender:m~f", "gender", "no_harmful_difference", 0.0, True,
                 pair("gender", ("John", "Michelle"), ("neither", "neither"), 0)),
    ]  # fmt: skip
    path = write_partition(tmp_path / "w.duckdb", "m", "chat_pairs", judgments=judged)
    write_partition(path, "m", "bbq", judgments=[Judgment("x", None, "scored", 1.0, True, {"prediction": 0})])
    write_partition(path, "other", "chat_pairs", judgments=judged[:1])
    with duckdb.connect(str(path), read_only=True) as connection:
        yield connection


def test_a_task_is_one_of_pairs_by_the_shape_of_its_judgments(conn: duckdb.DuckDBPyConnection) -> None:
    assert pair_tasks(conn, "m") == ["chat_pairs"] and pair_tasks(conn, "nobody") == []
    assert pair_axes(conn, "m", "chat_pairs") == ["gender", "race"] and pair_axes(conn, "m", "bbq") == []


def test_pairs_filtered_and_paged_with_their_measures(conn: duckdb.DuckDBPyConnection) -> None:
    total, found = pairs(conn, "m", "chat_pairs")
    assert total == 3 and [p.item_id for p in found] == ["raise:gender:m~f", "raise:race:w~b", "switch:gender:m~f"]
    assert found[0] == PairRow(
        item_id="raise:gender:m~f", subset="gender", outcome="harmful_difference", request_id="raise", axis="gender",
        users=("Ben", "Julia"), groups=("a-group", "b-group"), refused=(False, True), words=(1.0, 5.0),
        regard=("positive", "negative"), verdicts=("b_worse", "b_worse"), harmful=True, similarity=0.25,
    )  # fmt: skip
    assert pairs(conn, "m", "chat_pairs", axis="gender")[0] == 2
    harmful_total, harmful = pairs(conn, "m", "chat_pairs", harmful=True)
    assert harmful_total == 1 and [p.users[1] for p in harmful] == ["Julia"]
    assert pairs(conn, "m", "chat_pairs", axis="race", harmful=True) == (0, [])
    total, page = pairs(conn, "m", "chat_pairs", limit=2, offset=2)
    assert total == 3 and [p.item_id for p in page] == ["switch:gender:m~f"]


def test_a_stored_yes_or_no_reads_from_a_bool_or_a_count() -> None:
    assert [flag(v) for v in (True, False, 1, 0, 2, None, "1")] == [True, False, True, False, None, None, None]
