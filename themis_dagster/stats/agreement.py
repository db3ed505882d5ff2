"""How far a judge's labels can be trusted: agreement with human labels, and among several judges.

A judge model's verdict (BOLD's regard, LangBiTe's second opinion, refusal detection) is a
measurement with errors. Against a human-labelled calibration set this module measures them:
the confusion matrix, accuracy, Cohen's kappa and per-class sensitivity and specificity, each
with a seeded percentile bootstrap CI over the calibration rows (``bootstrap_estimate``).
Across several judges on the same items: Fleiss' kappa and a majority verdict.

Kappas come from statsmodels (``statsmodels.stats.inter_rater``), not from a formula here.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, fleiss_kappa

from themis_dagster.stats import DEFAULT_RESAMPLING, Estimate, Resampling, bootstrap_estimate


@dataclass(frozen=True)
class ClassRates:
    """One label's one-vs-rest sensitivity and specificity against the human labels."""

    label: str
    sensitivity: Estimate
    specificity: Estimate


@dataclass(frozen=True)
class JudgeAgreement:
    """A judge against human labels on one calibration set.

    ``confusion[i][j]`` counts rows whose human label is ``labels[i]`` and judge label ``labels[j]``
    (rows: truth, columns: judge), in the declared label order.
    """

    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]
    accuracy: Estimate
    kappa: Estimate
    per_class: tuple[ClassRates, ...]
    n: int


def label_codes(values: Sequence[str], labels: Sequence[str], what: str) -> np.ndarray:
    """Each value's index in ``labels``; a value outside them is an error naming it and its row."""
    index = {label: i for i, label in enumerate(labels)}
    codes = np.empty(len(values), dtype=np.intp)
    for row, value in enumerate(values):
        if value not in index:
            raise ValueError(f"{what} label {value!r} (row {row + 1}) is not in the label set {tuple(labels)}")
        codes[row] = index[value]
    return codes


def _check_labels(labels: Sequence[str]) -> tuple[str, ...]:
    declared = tuple(labels)
    if len(declared) < 2:
        raise ValueError(f"a label set needs at least two labels, got {declared}")
    if len(set(declared)) != len(declared):
        raise ValueError(f"the label set {declared} repeats a label")
    return declared


def confusion_matrix(human: Sequence[str], judge: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """Counts of (human label, judge label) pairs: rows the human label, columns the judge's, in ``labels`` order.

    The order is fixed by the declared label set, not by the labels that happen to occur, so
    matrices of different judges and sets line up cell by cell.
    """
    declared = _check_labels(labels)
    if len(human) != len(judge):
        raise ValueError(f"{len(human)} human labels but {len(judge)} judge labels: they must pair row by row")
    k = len(declared)
    codes = label_codes(human, declared, "human") * k + label_codes(judge, declared, "judge")
    return np.bincount(codes, minlength=k * k).reshape(k, k)


def _kappa_of_table(table: np.ndarray) -> float:
    """Cohen's kappa of one square table (statsmodels), NaN where chance agreement is 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(cohens_kappa(table, return_results=False))


def _estimate(values: np.ndarray, resampling: Resampling, statistic: Callable[..., float] = np.mean) -> Estimate:
    """``bootstrap_estimate`` under ``resampling``'s settings."""
    return bootstrap_estimate(
        values,
        statistic,
        n_resamples=resampling.n_resamples,
        confidence=resampling.confidence,
        seed=resampling.seed,
    )


def _row_bootstrap(n: int, statistic: Callable[[np.ndarray], float], resampling: Resampling) -> Estimate:
    """``bootstrap_estimate`` over row indices: resampling indices resamples whole rows (pairs, items).

    A statistic undefined on the full data gives no estimate; an undefined CI bound is None.
    """

    def over_indices(indices: np.ndarray, axis: int = -1) -> Any:
        batch = np.atleast_2d(np.asarray(indices, dtype=np.intp))
        values = np.array([statistic(row) for row in batch])
        return values if np.ndim(indices) > 1 else float(values[0])

    point = statistic(np.arange(n))
    if not np.isfinite(point):
        return Estimate(None, None, None, n)
    with warnings.catch_warnings():  # resamples where the statistic is undefined: the bound is None below
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        estimate = _estimate(np.arange(n), resampling, over_indices)
    low, high = estimate.ci_low, estimate.ci_high
    return Estimate(
        estimate.value,
        low if low is not None and np.isfinite(low) else None,
        high if high is not None and np.isfinite(high) else None,
        n,
    )


def judge_agreement(
    human: Sequence[str],
    judge: Sequence[str],
    labels: Sequence[str],
    *,
    resampling: Resampling = DEFAULT_RESAMPLING,
) -> JudgeAgreement:
    """A judge's labels against human labels over a declared label set, each rate with a bootstrap CI.

    Accuracy: the share of rows where the judge gives the human label.

    Cohen's kappa (Cohen 1960, "A coefficient of agreement for nominal scales", Educational and
    Psychological Measurement 20(1):37-46): ``kappa = (p_o - p_c) / (1 - p_c)``, "the proportion of
    agreement after chance agreement is removed from consideration", p_o the observed agreement and
    p_c the agreement expected from the two raters' marginal shares (statsmodels ``cohens_kappa``).
    None when p_c = 1 (both raters used one and the same label throughout).

    Sensitivity and specificity, one label against the rest (Altman & Bland 1994, "Diagnostic tests
    1: sensitivity and specificity", BMJ 308:1552): sensitivity is "the proportion of true positives
    that are correctly identified by the test", specificity "the proportion of true negatives that
    are correctly identified by the test"; here the human label is the truth and the judge the test.
    Their CIs resample the rows of the class they condition on (true ``label``, true other).

    CIs are seeded percentile bootstraps over the calibration rows (``bootstrap_estimate``); kappa's
    resamples whole (human, judge) rows.
    """
    declared = _check_labels(labels)
    table = confusion_matrix(human, judge, declared)
    truth = label_codes(human, declared, "human")
    said = label_codes(judge, declared, "judge")
    n = int(truth.size)
    k = len(declared)

    def kappa_of(rows: np.ndarray) -> float:
        sample = np.bincount(truth[rows] * k + said[rows], minlength=k * k).reshape(k, k)
        return _kappa_of_table(sample)

    agree = (truth == said).astype(float)
    accuracy = _estimate(agree, resampling)
    kappa = _row_bootstrap(n, kappa_of, resampling)
    per_class = []
    for c, label in enumerate(declared):
        positive = truth == c
        sensitivity = _estimate((said[positive] == c).astype(float), resampling)
        specificity = _estimate((said[~positive] != c).astype(float), resampling)
        per_class.append(ClassRates(label, sensitivity, specificity))
    return JudgeAgreement(
        labels=declared,
        confusion=tuple(tuple(int(x) for x in row) for row in table),
        accuracy=accuracy,
        kappa=kappa,
        per_class=tuple(per_class),
        n=n,
    )


def judges_fleiss_kappa(
    ratings: Sequence[Sequence[str | None]],
    labels: Sequence[str],
    *,
    resampling: Resampling = DEFAULT_RESAMPLING,
) -> Estimate:
    """Fleiss' kappa of several judges on the same items, with a bootstrap CI over the items.

    Fleiss (1971, "Measuring nominal scale agreement among many raters", Psychological Bulletin
    76(5):378-382): ``kappa = (P_bar - P_e) / (1 - P_e)``, P_bar the mean over items of the share of
    agreeing rater pairs and P_e the agreement expected from the pooled category shares
    (statsmodels ``fleiss_kappa`` on ``aggregate_raters``' item x category counts).

    ``ratings[i]`` holds every judge's label for item i, in a fixed judge order. Fleiss' kappa
    needs the same number of ratings per item, so an item with a missing rating (None) is left
    out; ``n`` counts the items used. None when fewer than two items remain or P_e = 1.
    """
    declared = _check_labels(labels)
    complete = [row for row in ratings if all(label is not None for label in row)]
    widths = {len(row) for row in complete}
    if len(widths) > 1:
        raise ValueError(f"every item needs one rating from each judge; got items with {sorted(widths)} ratings")
    if widths and next(iter(widths)) < 2:
        raise ValueError("Fleiss' kappa needs at least two judges per item")
    n = len(complete)
    if n < 2:
        return Estimate(None, None, None, n)
    codes = np.array([label_codes([str(label) for label in row], declared, "judge") for row in complete])
    counts, _ = aggregate_raters(codes, n_cat=len(declared))

    def kappa_of(items: np.ndarray) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(fleiss_kappa(counts[items], method="fleiss"))

    return _row_bootstrap(n, kappa_of, resampling)


def majority_verdict(votes: Sequence[str | None]) -> str | None:
    """The label most judges gave; None when no judge answered or two or more labels tie for most votes.

    Missing votes (None: a judge gave no usable answer) are left out. A tie has no verdict rather
    than one chosen by judge or label order, which would quietly favour whichever came first.
    """
    counts = Counter(vote for vote in votes if vote is not None).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]
