"""bootstrap_estimates: scipy.stats.bootstrap's percentile intervals, bit for bit, with draws shared by length."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from themis_dagster.stats import Estimate, bootstrap_estimate, bootstrap_estimates


def scipy_estimate(values: np.ndarray, statistic: Callable[..., float], seed: int, batch: int | None) -> Estimate:
    """What bootstrap_estimate computed before it resampled on its own: scipy.stats.bootstrap itself."""
    result = stats.bootstrap(
        (values,), statistic, n_resamples=1000, confidence_level=0.95, method="percentile", vectorized=True,
        batch=batch, rng=np.random.default_rng(seed),
    )  # fmt: skip
    value = float(statistic(values))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return Estimate(value, min(low, value), max(high, value), values.size)


@pytest.mark.parametrize("cells", [1 << 22, 777 * 64, 1000])  # one batch; 64 resamples a batch; one a batch
def test_shared_draws_give_scipys_intervals(monkeypatch: pytest.MonkeyPatch, cells: int) -> None:
    monkeypatch.setattr("themis_dagster.stats.BOOTSTRAP_CELLS", cells)
    rng = np.random.default_rng(3)
    continuous = rng.normal(2.0, 3.0, 777)
    binary = (rng.random(777) < 0.3).astype(float)
    shorter = rng.random(500)
    columns = [continuous, binary, shorter, binary[:500]]
    ours = bootstrap_estimates(columns, seed=11)
    assert ours == [scipy_estimate(column, np.mean, 11, max(1, cells // column.size)) for column in columns]
    assert [bootstrap_estimate(column, seed=11) for column in columns] == ours


def test_other_statistics_and_edge_cases() -> None:
    values = np.random.default_rng(5).exponential(1.0, 301)
    (median,) = bootstrap_estimates([values], np.median, seed=2)
    assert median == scipy_estimate(values, np.median, 2, None)
    assert bootstrap_estimates([[], [4.0], [1.0, 1.0, float("nan")], [0.0, 1.0, float("nan")]]) == [
        Estimate(None, None, None, 0),
        Estimate(4.0, None, None, 1),
        Estimate(1.0, 1.0, 1.0, 2),
        scipy_estimate(np.array([0.0, 1.0]), np.mean, 0, None),
    ]
