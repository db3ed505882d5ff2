"""A perturbation's paired effect, worked by hand on WinoBias-shaped judgments: both scopes, Holm, the no-op."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from themis_dagster.comparisons.perturbation_store import (
    changed_items,
    effects_in_warehouse,
    store_effects,
)
from themis_dagster.comparisons.perturbations import PerturbationEffect, perturbation_effects, with_holm
from themis_dagster.exchange import Request
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Judgment
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import to_frame
from themis_dagster.warehouse.read.comparisons import perturbation_effect_frame
from themis_dagster.warehouse.schema import ensure_schema

TASK = load_task("winobias")


def judgments(scores: list[int]) -> list[Judgment]:
    """Twelve sentences, pro and anti in turn, six line pairs of type 1."""
    return [
        Judgment(
            f"i{index:02d}",
            "type1",
            "correct" if score else "wrong",
            float(score),
            True,
            {"stereotype": "pro" if index % 2 == 0 else "anti", "pair": f"type1_{index // 2}"},
        )
        for index, score in enumerate(scores)
    ]


ORIGINAL = judgments([1] * 12)
PERTURBED = judgments([0] * 10 + [1, 1])  # the ten rewritten sentences all turn wrong
CHANGED = {f"i{index:02d}" for index in range(10)}


def by_key(rows: list[PerturbationEffect]) -> dict[tuple[str, str | None, str], PerturbationEffect]:
    return {(row.scope, row.subset, row.metric): row for row in rows}


def test_both_scopes_by_hand() -> None:
    rows = by_key(perturbation_effects(TASK, "m", "gender_swap", ORIGINAL, PERTURBED, CHANGED))
    everything = rows[("all", None, "accuracy")]
    # 12 pairs: perturbed 2/12 right, original 12/12; McNemar b = 0, c = 10: p = 2 * 0.5**10
    assert (everything.value, everything.original_value) == pytest.approx((2 / 12, 1.0))
    assert everything.difference == pytest.approx(-10 / 12)
    assert everything.p_value == pytest.approx(2 / 1024)
    assert (everything.n_pairs, everything.n_changed, everything.n_unchanged) == (12, 10, 2)
    assert everything.test == "mcnemar_exact"
    touched = rows[("changed", None, "accuracy")]
    assert (touched.value, touched.original_value, touched.difference) == (0.0, 1.0, -1.0)
    assert (touched.n_pairs, touched.p_value) == (10, pytest.approx(2 / 1024))
    pro = rows[("all", None, "accuracy_pro")]  # 6 pro sentences, 5 rewritten: b = 0, c = 5
    assert (pro.value, pro.n_pairs, pro.p_value) == (pytest.approx(1 / 6), 6, pytest.approx(2 / 32))
    assert rows[("changed", None, "accuracy_pro")].n_pairs == 5
    gap = rows[("all", None, "pro_anti_gap")]  # every pair's pro - anti stays 0 on both sides
    assert (gap.difference, gap.p_value, gap.test) == (0.0, 1.0, "paired_bootstrap")
    assert {scope for scope, _, _ in rows} == {"changed", "all"}
    assert {subset for _, subset, _ in rows} == {None, "type1"}


def test_holm_over_the_battery_by_hand() -> None:
    rows = with_holm(perturbation_effects(TASK, "m", "gender_swap", ORIGINAL, PERTURBED, CHANGED))
    adjusted = {(r.subset, r.metric): r.p_adjusted for r in rows if r.scope == "all"}
    # 8 p-values: 2/1024 twice, 1/16 four times, 1 twice. Holm: 8 * 2/1024 = 1/64, then max(6/16, 5/16, ...) = 3/8.
    assert adjusted[(None, "accuracy")] == adjusted[("type1", "accuracy")] == pytest.approx(1 / 64)
    assert adjusted[(None, "accuracy_pro")] == adjusted[(None, "accuracy_anti")] == pytest.approx(3 / 8)
    assert adjusted[(None, "pro_anti_gap")] == 1.0
    changed = [r for r in rows if r.scope == "changed"]
    assert changed and all(r.p_adjusted is not None for r in changed if r.p_value is not None)


def test_a_no_op_is_exactly_zero_with_p_one() -> None:
    rows = perturbation_effects(TASK, "m", "identity", ORIGINAL, judgments([1] * 12), set())
    assert rows and {r.scope for r in rows} == {"all"}  # nothing changed: nothing compared as changed
    assert all(r.difference == 0.0 and r.p_value == 1.0 for r in rows)
    assert all((r.n_changed, r.n_unchanged) == (0, 12) for r in rows)


def test_stored_and_adjusted_in_the_warehouse(tmp_path: Path) -> None:
    """The changed items read from the stored prompts; the view's Holm equals ``with_holm``'s."""
    variant = "winobias__gender_swap"
    requests = [Request.loglikelihood(f"sentence {i} about him", " x", f"i{i:02d}:a", f"i{i:02d}") for i in range(12)]
    swapped = [
        replace(r, context=r.context.replace("him", "her")) if index < 10 else r  # type: ignore[union-attr]
        for index, r in enumerate(requests)
    ]
    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        ensure_schema(conn)
        for task, prompts, judged in (("winobias", requests, ORIGINAL), (variant, swapped, PERTURBED)):
            append_rows(conn, "prompts", to_frame("prompts", prompts, model="m", task=task))
            append_rows(conn, "judgments", to_frame("judgments", judged, model="m", task=task))
        assert changed_items(conn, "m", "winobias", variant) == CHANGED
        rows = effects_in_warehouse(conn, TASK, "m", variant, "gender_swap")
        assert store_effects(conn, "m", variant, "winobias", "key", rows, run_id="r") == len(rows)
        view = perturbation_effect_frame(conn, "m").to_dicts()
        assert perturbation_effect_frame(conn, "m", "winobias").is_empty()
    expected = {(r.scope, r.subset, r.metric): r.p_adjusted for r in with_holm(rows)}
    assert {(r["scope"], r["subset"], r["metric"]): r["p_adjusted"] for r in view} == pytest.approx(expected)
    assert {r["task"] for r in view} == {variant} and {r["base_task"] for r in view} == {"winobias"}
    assert {(r["n_changed"], r["n_unchanged"]) for r in view} == {(10, 2)}
