"""IAT metrics over judgments: overall, per category, per stimulus set and per prompt variation.

- ``d_score``: mean per-reply D over parsed replies with a seeded percentile bootstrap CI
  (``themis_dagster.stats.bootstrap_estimate``; the reference reports means with 95% CIs).
- ``d_score_p_value``: two-sided sign-flip permutation p-value for H0: mean D = 0
  (``themis_dagster.stats.permutation_pvalue_mean_zero``).
- ``d_score_t_test_p_value`` / ``d_score_t_statistic``: the paper's two-sided one-sample t-test
  (``scipy.stats.ttest_1samp(D, popmean=0)``), reported beside the permutation p-value.
- ``parse_success_rate``: share of all replies that were parsed, with a bootstrap CI.
- ``outcome_share`` (subset ``outcome=<name>``): share of all replies per judgment outcome.

Subsets: None (headline), the category (``"race"``), the set (``"race/racism"``) and
``"variation=<name>"``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

import numpy as np

from themis_dagster.stats import bootstrap_estimate, permutation_pvalue_mean_zero, t_test_mean_zero
from themis_dagster.tasks.spec import Judgment, MetricValue, TaskParams


def subsets_of(judgment: Judgment) -> list[str | None]:
    """Every slice a judgment counts in, headline (None) first."""
    detail = judgment.detail
    keys: list[str | None] = [None]
    if detail.get("category"):
        keys.append(str(detail["category"]))
    if judgment.subset:
        keys.append(judgment.subset)
    if detail.get("variation"):
        keys.append(f"variation={detail['variation']}")
    return keys


def _order(key: str | None) -> tuple[int, str]:
    if key is None:
        return (0, "")
    return (3 if key.startswith("variation=") else 2 if "/" in key else 1, key)


def _grouped(judgments: Iterable[Judgment], parsed_only: bool) -> dict[str | None, list[float]]:
    groups: dict[str | None, list[float]] = defaultdict(list)
    groups[None] = []
    for judgment in judgments:
        keys = subsets_of(judgment)
        if parsed_only and judgment.score is None:  # scoring=reference scores discarded replies as 0
            for key in keys:  # the slice is reported (n = 0) even when nothing in it parsed
                groups.setdefault(key, [])
            continue
        value = float(judgment.score) if parsed_only and judgment.score is not None else float(judgment.parsed)
        for key in keys:
            groups[key].append(value)
    return groups


def _estimates(metric: str, groups: dict[str | None, list[float]], params: TaskParams) -> list[MetricValue]:
    rows = []
    for key in sorted(groups, key=_order):
        estimate = bootstrap_estimate(
            groups[key],
            np.mean,
            n_resamples=params.bootstrap_resamples,
            confidence=params.confidence,
            seed=params.seed,
        )
        rows.append(MetricValue(key, metric, estimate.value, estimate.ci_low, estimate.ci_high, estimate.n))
    return rows


def _p_values(groups: dict[str | None, list[float]], resamples: int, seed: int) -> list[MetricValue]:
    rows = []
    for key in sorted(groups, key=_order):
        p_value = permutation_pvalue_mean_zero(groups[key], n_resamples=resamples, seed=seed)
        rows.append(MetricValue(key, "d_score_p_value", p_value, None, None, len(groups[key])))
    return rows


def _t_tests(groups: dict[str | None, list[float]]) -> list[MetricValue]:
    rows = []
    for key in sorted(groups, key=_order):
        test = t_test_mean_zero(groups[key])
        rows.append(MetricValue(key, "d_score_t_test_p_value", test.p_value, None, None, test.n))
        rows.append(MetricValue(key, "d_score_t_statistic", test.statistic, None, None, test.n))
    return rows


def _outcome_shares(judgments: list[Judgment]) -> list[MetricValue]:
    counts = Counter(judgment.outcome for judgment in judgments)
    total = len(judgments)
    return [
        MetricValue(f"outcome={name}", "outcome_share", counts[name] / total, None, None, total)
        for name in sorted(counts)
    ]


def iat_metrics(judgments: list[Judgment], params: TaskParams) -> list[MetricValue]:
    """All IAT metric rows for one model's judgments."""
    scores = _grouped(judgments, parsed_only=True)
    resamples = int(getattr(params, "permutation_resamples", 10_000))
    return (
        _estimates("d_score", scores, params)
        + _p_values(scores, resamples, params.seed)
        + _t_tests(scores)
        + _estimates("parse_success_rate", _grouped(judgments, parsed_only=False), params)
        + _outcome_shares(judgments)
    )
