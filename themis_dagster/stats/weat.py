"""WEAT and WEFAT (Caliskan, Bryson and Narayanan, "Semantics derived automatically from language
corpora contain human-like biases", Science 356, 2017; supplementary materials).

The published definitions, as implemented here:

- ``s(w, A, B) = mean_{a in A} cos(w, a) - mean_{b in B} cos(w, b)``
- test statistic ``s(X, Y, A, B) = sum_{x in X} s(x, A, B) - sum_{y in Y} s(y, A, B)``
- one-sided permutation p-value ``Pr_i[s(X_i, Y_i, A, B) > s(X, Y, A, B)]`` over the partitions
  ``{(X_i, Y_i)}`` of ``X u Y`` into two sets of the sizes of X and Y (strictly greater, as
  published; the observed partition is one of them)
- effect size ``d = (mean_{x in X} s(x, A, B) - mean_{y in Y} s(y, A, B)) / std-dev_{w in X u Y} s(w, A, B)``
- WEFAT, per word w:
  ``s(w, A, B) = (mean_{a in A} cos(w, a) - mean_{b in B} cos(w, b)) / std-dev_{x in A u B} cos(w, x)``

``std-dev`` is the sample standard deviation (ddof = 1). The IAT framework's ``analysis/weat.py``
(from chadaeun/weat_replication) divides by the population one (ddof = 0) plus 0.001; pass
``ddof=0`` to get its value without the 0.001 (docs/iat.md gives the size of the difference).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from themis_dagster.stats import Resampling

MAX_EXACT_PARTITIONS = 100_000  # more partitions than this: sampled
# WEAT's own bootstrap defaults (not the package's DEFAULT_RESAMPLING): 10,000 resamples, seed 42.
WEAT_RESAMPLING = Resampling(n_resamples=10_000, confidence=0.95, seed=42)


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    matrix = np.atleast_2d(np.asarray(vectors, dtype=float))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("a zero vector has no direction (cosine undefined)")
    unit: np.ndarray = matrix / norms
    return unit


def cosine_matrix(words: np.ndarray, others: np.ndarray) -> np.ndarray:
    """``cos(w, o)`` for every row w of ``words`` and row o of ``others``."""
    cosines: np.ndarray = _unit_rows(words) @ _unit_rows(others).T
    return cosines


def association(words: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``s(w, A, B)`` for every row w of ``words``."""
    scores: np.ndarray = cosine_matrix(words, a).mean(axis=1) - cosine_matrix(words, b).mean(axis=1)
    return scores


def effect_size_of(sx: np.ndarray, sy: np.ndarray, ddof: int = 1) -> float | None:
    """``d`` from the associations of X's and Y's words; None when the spread is 0 or too few words."""
    pooled = np.concatenate([sx, sy])
    if len(sx) == 0 or len(sy) == 0 or len(pooled) <= ddof:
        return None
    spread = float(np.std(pooled, ddof=ddof))
    return None if spread == 0 else float((np.mean(sx) - np.mean(sy)) / spread)


@dataclass(frozen=True)
class WeatResult:
    """One WEAT: statistic, effect size with its bootstrap CI, and the permutation p-value."""

    statistic: float
    effect_size: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float
    partitions: int  # how many partitions the p-value counts over
    exact: bool  # all partitions (True) or a seeded sample of them
    n_x: int
    n_y: int


def permutation_p_value(
    sx: np.ndarray, sy: np.ndarray, *, max_exact: int = MAX_EXACT_PARTITIONS, n_resamples: int = 10_000, seed: int = 42
) -> tuple[float, int, bool]:
    """One-sided ``Pr_i[s(X_i, Y_i) > s(X, Y)]``: every partition when there are at most ``max_exact``, else sampled.

    ``s(X_i, Y_i) = 2 * sum(s over X_i) - sum(s over X u Y)``, so a partition is the choice of X_i.
    Returns (p-value, partitions counted, exact).
    """
    pooled = np.concatenate([sx, sy])
    n, k = len(pooled), len(sx)
    total = float(pooled.sum())
    observed = 2.0 * float(sx.sum()) - total
    tolerance = 1e-12 * max(1.0, abs(observed))  # equal sums in another order are not "greater"
    count = math.comb(n, k)
    if count <= max_exact:
        sums = np.fromiter(
            (pooled[list(chosen)].sum() for chosen in itertools.combinations(range(n), k)), float, count=count
        )
        exact = True
    else:
        rng = np.random.default_rng(seed)
        sums = np.array([pooled[rng.permutation(n)[:k]].sum() for _ in range(n_resamples)])
        count, exact = n_resamples, False
    greater = int(np.sum(2.0 * sums - total > observed + tolerance))
    return greater / count, count, exact


def bootstrap_effect_size_ci(
    sx: np.ndarray,
    sy: np.ndarray,
    *,
    ddof: int = 1,
    resampling: Resampling = WEAT_RESAMPLING,
) -> tuple[float | None, float | None]:
    """Percentile CI of d over resampled target words: X's and Y's words each drawn with replacement.

    A and B stay fixed (each target word's association is computed once). A resample whose
    words all share one association has no d (spread 0) and is left out, which with two-word
    sets happens often; None when fewer than half the resamples have a d.
    """
    n_resamples = resampling.n_resamples
    rng = np.random.default_rng(resampling.seed)
    rx = sx[rng.integers(len(sx), size=(n_resamples, len(sx)))]
    ry = sy[rng.integers(len(sy), size=(n_resamples, len(sy)))]
    spread = np.std(np.concatenate([rx, ry], axis=1), axis=1, ddof=ddof)
    defined = spread > 1e-15
    if defined.sum() < n_resamples / 2:
        return None, None
    d = (rx.mean(axis=1) - ry.mean(axis=1))[defined] / spread[defined]
    tail = (1.0 - resampling.confidence) / 2.0 * 100.0
    low, high = np.percentile(d, [tail, 100.0 - tail])
    return float(low), float(high)


def weat(
    x: np.ndarray,
    y: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    *,
    ddof: int = 1,
    resampling: Resampling = WEAT_RESAMPLING,
    max_exact: int = MAX_EXACT_PARTITIONS,
    permutation_resamples: int = 10_000,
) -> WeatResult:
    """WEAT of targets X, Y against attributes A, B (rows are word vectors).

    The CI resamples the target words (``bootstrap_effect_size_ci``, ``resampling.n_resamples``); None
    when X or Y has one word. The p-value samples ``permutation_resamples`` partitions when there are
    more than ``max_exact``, seeded with ``resampling.seed``.
    """
    sx, sy = association(x, a, b), association(y, a, b)
    p_value, partitions, exact = permutation_p_value(
        sx, sy, max_exact=max_exact, n_resamples=permutation_resamples, seed=resampling.seed
    )
    d = effect_size_of(sx, sy, ddof)
    low = high = None
    if d is not None and len(sx) > 1 and len(sy) > 1:
        low, high = bootstrap_effect_size_ci(sx, sy, ddof=ddof, resampling=resampling)
    statistic_value = float(sx.sum() - sy.sum())
    return WeatResult(statistic_value, d, low, high, p_value, partitions, exact, len(sx), len(sy))


def wefat(words: np.ndarray, a: np.ndarray, b: np.ndarray, ddof: int = 1) -> list[float | None]:
    """WEFAT ``s(w, A, B)`` normalized by the spread of w's cosines to ``A u B``; None when that is 0."""
    ca, cb = cosine_matrix(words, a), cosine_matrix(words, b)
    spread = np.std(np.concatenate([ca, cb], axis=1), axis=1, ddof=ddof)
    raw = ca.mean(axis=1) - cb.mean(axis=1)
    return [None if s == 0 else float(r / s) for r, s in zip(raw, spread, strict=True)]
