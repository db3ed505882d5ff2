"""Uncertainty for every metric: seeded bootstrap CIs and permutation tests (scipy.stats)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
# Resampled values held at once: scipy's vectorized bootstrap draws n_resamples x n indices in
# one array unless told to batch (4 GB at n = 500k); batching draws the same numbers in turn.
BOOTSTRAP_CELLS = 1 << 22


@dataclass(frozen=True)
class Estimate:
    """A point estimate over ``n`` observations with its confidence interval (None when n < 2)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass(frozen=True)
class Resampling:
    """A seeded bootstrap's settings: how many resamples, the CI's confidence level, the generator's seed."""

    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = 0


DEFAULT_RESAMPLING = Resampling()


def bootstrap_estimate(
    values: Sequence[float] | np.ndarray,
    statistic: Callable[..., float] = np.mean,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> Estimate:
    """Point estimate and percentile bootstrap CI (``scipy.stats.bootstrap``, seeded).

    The percentile method is used because BCa is undefined for the many
    degenerate samples bias benchmarks produce (all items scored 0 or 1).
    """
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    n = int(data.size)
    if n == 0:
        return Estimate(None, None, None, 0)
    value = float(statistic(data))
    if n < 2:
        return Estimate(value, None, None, n)
    if np.all(data == data[0]):
        return Estimate(value, value, value, n)
    result = stats.bootstrap(
        (data,),
        statistic,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        batch=max(1, BOOTSTRAP_CELLS // n),
        rng=np.random.default_rng(seed),
    )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return Estimate(value, min(low, value), max(high, value), n)


def permutation_pvalue_mean_zero(
    values: Sequence[float] | np.ndarray, *, n_resamples: int = 10_000, seed: int = 0
) -> float | None:
    """Two-sided p-value for H0: mean = 0, by sign-flipping (``scipy.stats.permutation_test``).

    Under H0 each observation is symmetric about zero, so the test statistic (the mean)
    is compared with its distribution over random sign flips (``permutation_type='samples'``
    with a single sample flips signs).
    """
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    if data.size < 2 or np.all(data == 0):
        return None if data.size < 2 else 1.0
    result = stats.permutation_test(
        (data,),
        lambda x, axis=-1: np.mean(x, axis=axis),
        permutation_type="samples",
        n_resamples=n_resamples,
        alternative="two-sided",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


@dataclass(frozen=True)
class TTest:
    """A one-sample t-test: the statistic, its two-sided p-value and the sample size."""

    statistic: float | None
    p_value: float | None
    n: int


def t_test_mean_zero(values: Sequence[float] | np.ndarray) -> TTest:
    """Two-sided one-sample t-test of H0: mean = 0 (``scipy.stats.ttest_1samp(values, popmean=0)``).

    The test the IAT paper reports (Bai et al., ``analysis/analysis_implicit.ipynb``); it assumes
    roughly normal means, where the permutation test assumes only symmetry. None when n < 2 or
    every value is equal (the statistic is undefined).
    """
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    if data.size < 2 or np.all(data == data[0]):
        return TTest(None, None, int(data.size))
    result = stats.ttest_1samp(data, popmean=0.0)
    return TTest(float(result.statistic), float(result.pvalue), int(data.size))
