"""A perturbed variant against its original: the items it changed (read from the stored prompts), both judgments."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from tests.warehouse.read.handmade import write_partition
from themis_dagster.comparisons.perturbation_store import changed_items, store_effects
from themis_dagster.comparisons.perturbations import PerturbationEffect
from themis_dagster.exchange import Request
from themis_dagster.tasks.spec import Judgment
from themis_dagster.warehouse.read.perturbed import Variant, changed_item_ids, perturbed_items, variants

VARIANT = "wino__gender_swap"


def judged(scores: list[int]) -> list[Judgment]:
    return [Judgment(f"i{i}", "type1", "correct" if s else "wrong", float(s), True) for i, s in enumerate(scores)]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """Four items: i0 and i1 rewritten (i0 then judged wrong), i2 and i3 not (i3 judged differently anyway)."""
    original = [Request.loglikelihood(f"sentence {i} about him", " x", f"i{i}:a", f"i{i}") for i in range(4)]
    swapped = [replace(r, context=r.context.replace("him", "her")) if i < 2 else r for i, r in enumerate(original)]  # type: ignore[union-attr]
    target = write_partition(tmp_path / "w.duckdb", "m", "wino", requests=original, judgments=judged([1, 1, 1, 1]))
    return write_partition(target, "m", VARIANT, requests=swapped, judgments=judged([0, 1, 1, 0]))


def test_the_changed_items_are_read_from_the_prompts_once_for_effects_and_explorer(path: Path) -> None:
    with duckdb.connect(str(path), read_only=True) as conn:
        assert changed_item_ids(conn, "m", "wino", VARIANT) == {"i0", "i1"} == changed_items(conn, "m", "wino", VARIANT)
        assert changed_item_ids(conn, "m", "wino", "wino__identity") == set()


def test_the_items_both_sides_judged_filtered_and_paged(path: Path) -> None:
    with duckdb.connect(str(path), read_only=True) as conn:
        total, changed = perturbed_items(conn, "m", "wino", VARIANT)
        shown = [(i.item_id, i.changed, i.differs) for i in changed]
        assert total == 2 and shown == [("i0", True, True), ("i1", True, False)]
        first = changed[0]
        assert (first.original_outcome, first.original_score, first.perturbed_outcome, first.perturbed_score) == (
            "correct",
            1.0,
            "wrong",
            0.0,
        )
        every, _ = perturbed_items(conn, "m", "wino", VARIANT, changed_only=False)
        assert every == 4
        total, differing = perturbed_items(conn, "m", "wino", VARIANT, changed_only=False, differing=True)
        assert total == 2 and [i.item_id for i in differing] == ["i0", "i3"]  # i3: unchanged, judged differently
        assert [i.item_id for i in perturbed_items(conn, "m", "wino", VARIANT, changed_only=False, limit=1,
                                                   offset=3)[1]] == ["i3"]  # fmt: skip


def test_variants_are_those_with_measured_effects(path: Path) -> None:
    with duckdb.connect(str(path)) as conn:
        assert variants(conn, "m") == []  # no effects stored yet
        effects = [
            PerturbationEffect("m", VARIANT, "gender_swap", scope, None, "accuracy", 0.5, 1.0, -0.5, -1.0, 0.0, 0.5,
                               n, 2, 2, "mcnemar_exact")
            for scope, n in (("changed", 2), ("all", 4))
        ]  # fmt: skip
        store_effects(conn, "m", VARIANT, "wino", "key", effects, run_id="r")
        assert variants(conn, "m") == [Variant(VARIANT, "wino", "gender_swap", 2, 2)]
        assert variants(conn, "other") == []
