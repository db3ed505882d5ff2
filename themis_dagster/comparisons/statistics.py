"""Paired tests for two models answering the same items: exact McNemar, sign-flip permutation, paired bootstrap, Holm.

Every function takes per-item values already matched by item id (position i of both
arrays is the same item) and is seeded, so a comparison is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

EXACT_PERMUTATION_LIMIT = 16  # up to 2**16 sign patterns are enumerated; beyond, Monte Carlo
DEFAULT_PERMUTATIONS = 10_000


@dataclass(frozen=True)
class TestResult:
    """A two-sided p-value and how it was obtained (``permutations``: sign patterns drawn or enumerated)."""

    p_value: float
    permutations: int | None = None
    exact: bool = True


def mcnemar_exact(model: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray) -> TestResult:
    """Exact McNemar test on paired binary outcomes (McNemar 1947; the exact form of Fay 2010).

    With b = #(model 1, baseline 0) and c = #(model 0, baseline 1) the discordant pairs,
    under H0 b ~ Binomial(b + c, 1/2), and the two-sided p-value is
    ``binomtest(b, b + c, 0.5).pvalue`` = min(1, 2 * P(X <= min(b, c))) for the symmetric
    binomial, which is what ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)``
    computes. No discordant pair: p = 1.
    """
    a, z = np.asarray(model, dtype=float), np.asarray(baseline, dtype=float)
    b = int(np.sum((a == 1) & (z == 0)))
    c = int(np.sum((a == 0) & (z == 1)))
    if b + c == 0:
        return TestResult(1.0)
    return TestResult(float(stats.binomtest(b, b + c, 0.5).pvalue))


def sign_flip_permutation(
    model: Sequence[float] | np.ndarray,
    baseline: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> TestResult:
    """Paired permutation test of H0: the mean of d_i = model_i - baseline_i is 0 (Fisher 1935; Good 2005, §3.1).

    Under H0 each d_i is symmetric about 0, so the statistic |mean(d)| is compared with its
    distribution over the 2^n sign flips s_i d_i. Pairs with d_i = 0 do not change under a
    flip and are left out. Exact (all 2^n patterns, ``scipy.stats.permutation_test`` with
    ``permutation_type='samples'``) when n <= 16 nonzero differences, otherwise Monte Carlo
    with ``n_resamples`` random patterns (p = (1 + #as extreme) / (1 + n_resamples), scipy's
    convention). All differences zero: p = 1.
    """
    d = np.asarray(model, dtype=float) - np.asarray(baseline, dtype=float)
    d = d[d != 0]
    if d.size == 0:
        return TestResult(1.0, 0, True)
    if d.size == 1:  # both sign patterns are as extreme as the observed one
        return TestResult(1.0, 2, True)
    exact = d.size <= EXACT_PERMUTATION_LIMIT
    resamples = 2**d.size if exact else n_resamples
    result = stats.permutation_test(
        (d,),
        lambda x, axis=-1: np.mean(x, axis=axis),
        permutation_type="samples",
        n_resamples=resamples if exact else n_resamples,
        alternative="two-sided",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return TestResult(min(1.0, float(result.pvalue)), resamples, exact)


@dataclass(frozen=True)
class PairedEstimate:
    """A statistic on a model and on its baseline over the same items, their difference with its CI, a p-value."""

    value: float | None
    baseline_value: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None


@dataclass(frozen=True)
class PairedBootstrap(PairedEstimate):
    """The statistic on each model over the same items, their difference's percentile CI and bootstrap p-value."""

    resamples: int


def paired_bootstrap(
    model: Sequence[Any],
    baseline: Sequence[Any],
    statistic: Callable[[list[Any]], float | None],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedBootstrap:
    """Paired (case-resampling) bootstrap of statistic(model) - statistic(baseline) (Efron & Tibshirani 1993, §16.3).

    Each resample draws n item positions with replacement (seeded) and evaluates the
    statistic on *the same* positions for both models, so what the two share cancels.
    CI: the percentile interval of the resampled differences. p-value: the percentile
    interval inverted, p = min(1, 2 * min(P*(d* <= 0), P*(d* >= 0))) (Hall 1992, §3.12);
    identical inputs give every d* = 0 and p = 1. Resamples where either statistic is
    undefined (None) are left out.
    """
    n = len(model)
    if n != len(baseline):
        raise ValueError(f"paired inputs differ in length: {n} and {len(baseline)}")
    value, base = statistic(list(model)), statistic(list(baseline))
    difference = None if value is None or base is None else value - base
    if n < 2 or difference is None:
        return PairedBootstrap(value, base, difference, None, None, None, 0)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_resamples, n))
    deltas = []
    for picked in draws:
        a = statistic([model[i] for i in picked])
        b = statistic([baseline[i] for i in picked])
        if a is not None and b is not None:
            deltas.append(a - b)
    if not deltas:
        return PairedBootstrap(value, base, difference, None, None, None, 0)
    resampled = np.asarray(deltas)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(resampled, [tail, 1.0 - tail])
    p = min(1.0, 2.0 * min(float(np.mean(resampled <= 0)), float(np.mean(resampled >= 0))))
    return PairedBootstrap(
        value, base, difference, min(float(low), difference), max(float(high), difference), p, len(deltas)
    )


def mean_difference_ci(
    model: np.ndarray, baseline: np.ndarray, *, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> tuple[float | None, float | None]:
    """Percentile CI of mean(model - baseline) from a paired bootstrap (same items for both), vectorised."""
    d = np.asarray(model, dtype=float) - np.asarray(baseline, dtype=float)
    if d.size < 2:
        return None, None
    mean = float(d.mean())
    if np.all(d == d[0]):
        return mean, mean
    draws = np.random.default_rng(seed).integers(0, d.size, size=(n_resamples, d.size))
    resampled = d[draws].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(resampled, [tail, 1.0 - tail])
    return min(float(low), mean), max(float(high), mean)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (Holm 1979), controlling the family-wise error rate.

    With p_(1) <= ... <= p_(m) sorted ascending, the adjusted value of the i-th smallest is
    ``max_{j <= i} min(1, (m - j + 1) * p_(j))``; returned in the input order. Equals
    ``statsmodels.stats.multitest.multipletests(p, method="holm")[1]``.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
