"""WEAT / WEFAT on hand-worked vectors (Caliskan et al. 2017's formulas, worked on paper)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from themis_dagster.stats.weat import (
    WEAT_RESAMPLING,
    association,
    effect_size_of,
    permutation_p_value,
    weat,
    wefat,
)

A = np.array([[1.0, 0.0]])
B = np.array([[0.0, 1.0]])
# s(w, A, B) = cos(w, A) - cos(w, B): (1,0) -> 1, (1,1) -> 0, (0,1) -> -1, (2,0) -> 1
X = np.array([[1.0, 0.0], [1.0, 1.0]])
Y = np.array([[0.0, 1.0], [1.0, 1.0]])


def test_association_by_hand() -> None:
    assert association(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [2.0, 0.0]]), A, B) == pytest.approx(
        [1.0, 0.0, -1.0, 1.0]
    )


def test_weat_by_hand() -> None:
    result = weat(X, Y, A, B, resampling=replace(WEAT_RESAMPLING, n_resamples=2000))
    # statistic: (1 + 0) - (-1 + 0) = 2
    assert result.statistic == pytest.approx(2.0)
    # d = (0.5 - (-0.5)) / std([1, 0, -1, 0], ddof=1) = 1 / sqrt(2/3) = sqrt(3/2)
    assert result.effect_size == pytest.approx(math.sqrt(1.5))
    # partitions of {1, 0, -1, 0} into two pairs: statistics 2, 0, 2, -2, 0, -2; none > 2
    assert (result.p_value, result.partitions, result.exact) == (0.0, 6, True)
    assert result.ci_low is not None and result.ci_high is not None
    assert result.ci_low <= result.effect_size <= result.ci_high


def test_p_value_counts_strictly_greater_partitions() -> None:
    # X = {(1,1), (0,1)}: s = 0, -1, statistic -2; partitions with a greater one: 2, 0, 2, 0 -> 4 of 6
    p, partitions, exact = permutation_p_value(np.array([0.0, -1.0]), np.array([1.0, 0.0]))
    assert (p, partitions, exact) == (pytest.approx(4 / 6), 6, True)


def test_sampled_when_too_many_partitions() -> None:
    rng = np.random.default_rng(0)
    sx, sy = rng.normal(0.3, 1, 8), rng.normal(0, 1, 8)
    exact_p, exact_n, _ = permutation_p_value(sx, sy)
    assert exact_n == math.comb(16, 8)
    sampled_p, sampled_n, exact = permutation_p_value(sx, sy, max_exact=1000, n_resamples=5000, seed=1)
    assert (sampled_n, exact) == (5000, False)
    assert sampled_p == pytest.approx(exact_p, abs=0.02)
    assert permutation_p_value(sx, sy, max_exact=1000, n_resamples=5000, seed=1)[0] == sampled_p  # seeded


def test_reference_weat_py_variant_size() -> None:
    # analysis/weat.py: (mean_x - mean_y) / (np.std(..., ddof=0) + 0.001)
    sx, sy = association(X, A, B), association(Y, A, B)
    assert effect_size_of(sx, sy, ddof=0) == pytest.approx(1 / math.sqrt(0.5))
    reference = (np.mean(sx) - np.mean(sy)) / (np.std(np.concatenate([sx, sy])) + 0.001)
    assert reference == pytest.approx(1 / (math.sqrt(0.5) + 0.001))


def test_single_word_targets_have_no_ci() -> None:
    result = weat(X[:1], Y[:1], A, B)
    assert result.ci_low is None and result.partitions == 2 and result.effect_size == pytest.approx(math.sqrt(2))


def test_wefat_by_hand() -> None:
    # w = (2,1): cos to A = 2/sqrt5, to B = 1/sqrt5; spread std([2,1]/sqrt5, ddof=1) = (1/sqrt5)/sqrt2
    # -> (1/sqrt5) / ((1/sqrt5)/sqrt2) = sqrt2; w = (1,1) is equally close: spread 0 -> None
    assert wefat(np.array([[2.0, 1.0], [1.0, 1.0]]), A, B) == [pytest.approx(math.sqrt(2)), None]


def test_zero_vector_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="zero vector"):
        association(np.array([[0.0, 0.0]]), A, B)
