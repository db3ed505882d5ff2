"""A judged metric beside its judge: the judge's measured agreement and the metric corrected for its errors.

A metric that counts a class a judge model gave (BOLD's negative regard share) is only as good
as the judge. ``JudgeCalibration`` is what a calibration (``assets/judge_calibration.py``) measured
of one judge on one calibration set: the human and judge labels of every readable row and the
judge's Cohen's kappa. ``JudgedValue`` is one judged metric reported twice, as judged and as
corrected (``stats.misclassification``), or with a note saying why it could not be corrected:
"uncalibrated judge" when the judge has no calibration for that label, the refusal reason of the
correction (a judge no better than chance) otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from themis_dagster.stats import DEFAULT_CONFIDENCE, Estimate, Resampling
from themis_dagster.stats.misclassification import GroupCorrection, corrected_shares_by_group, widened_interval

UNCALIBRATED = "uncalibrated judge"
Interval = tuple[float, float | None, float | None]
"""A corrected estimate: (value, CI low, CI high)."""


@dataclass(frozen=True)
class JudgeCalibration:
    """One judge measured on one calibration set: the paired (human, judge) labels of its readable rows."""

    judge: str
    calibration_set: str
    labels: tuple[str, ...]
    human: tuple[str, ...]
    judged: tuple[str, ...]
    kappa: Estimate | None = None


@dataclass(frozen=True)
class JudgedValue:
    """A judged metric's value (one subset) as judged and as corrected for its judge's errors.

    ``corrected`` None: ``note`` says why (``UNCALIBRATED``, or why the judge's confusion matrix
    cannot be inverted). ``calibration_set`` None: the judge has no calibration for this label.
    """

    subset: str | None
    metric: str
    judge: str
    value: float | None
    calibration_set: str | None = None
    kappa: float | None = None
    kappa_ci_low: float | None = None
    kappa_ci_high: float | None = None
    corrected: float | None = None
    corrected_ci_low: float | None = None
    corrected_ci_high: float | None = None
    n_calibration: int | None = None
    note: str | None = None


def uncorrected(
    subset: str | None, metric: str, judge: str, value: float | None, calibration: JudgeCalibration | None, note: str
) -> JudgedValue:
    """A judged value without a correction, and why (with the calibration's kappa when there is one)."""
    if calibration is None:
        return JudgedValue(subset, metric, judge, value, note=note)
    kappa = calibration.kappa or Estimate(None, None, None, 0)
    return JudgedValue(
        subset, metric, judge, value, calibration.calibration_set, kappa.value, kappa.ci_low, kappa.ci_high,
        n_calibration=len(calibration.human), note=note,
    )  # fmt: skip


def corrected(
    subset: str | None,
    metric: str,
    value: float | None,
    calibration: JudgeCalibration,
    estimate: Interval,
) -> JudgedValue:
    """A judged value with its corrected ``estimate`` (value, CI low, CI high)."""
    kappa = calibration.kappa or Estimate(None, None, None, 0)
    return JudgedValue(
        subset, metric, calibration.judge, value, calibration.calibration_set, kappa.value, kappa.ci_low,
        kappa.ci_high, estimate[0], estimate[1], estimate[2], len(calibration.human),
    )  # fmt: skip


def judged_value(
    subset: str | None,
    metric: str,
    judge: str,
    value: float | None,
    calibration: JudgeCalibration,
    estimate: Interval | None,
    note: str,
) -> JudgedValue:
    """``value`` with its corrected ``estimate`` (:func:`corrected`), or as judged with ``note`` saying why there is
    none (:func:`uncorrected`)."""
    if estimate is None:
        return uncorrected(subset, metric, judge, value, calibration, note)
    return corrected(subset, metric, value, calibration, estimate)


def corrected_values(
    rows: Sequence[tuple[str | None, str, float | None]],
    judge: str,
    calibration: JudgeCalibration | None,
    slices: Mapping[str, Sequence[str]],
    estimate: Callable[[GroupCorrection, str | None, str], Interval | None],
    *,
    resampling: Resampling,
    empty: str,
) -> list[JudgedValue]:
    """Each of ``rows`` (subset, metric, value as the task computed it) beside its judge and corrected for the
    judge's errors on ``calibration``.

    The judge's labels of each slice (``slices``) are corrected together by inverting its confusion matrix
    (``stats.misclassification.corrected_shares_by_group``); ``estimate(correction, subset, metric)`` reads a
    row's corrected value and CI from them. Without a calibration every row is "uncalibrated judge"; a row
    without an estimate carries the correction's refusal (a judge no better than chance), else ``empty``.
    """
    if calibration is None:
        return [uncorrected(subset, metric, judge, value, None, UNCALIBRATED) for subset, metric, value in rows]
    correction = corrected_shares_by_group(
        slices, calibration.human, calibration.judged, calibration.labels, resampling=resampling
    )
    out = []
    for subset, metric, value in rows:
        found = None if correction.reason else estimate(correction, subset, metric)
        out.append(judged_value(subset, metric, judge, value, calibration, found, correction.reason or empty))
    return out


def interval(replicates: np.ndarray, value: float, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """(value, low, high): the percentile interval of the replicates, widened to hold the value (None: none)."""
    low, high = widened_interval(replicates, value, confidence)
    return value, low, high


def share(
    correction: GroupCorrection, group: str, label: str, confidence: float = DEFAULT_CONFIDENCE
) -> Interval | None:
    """Group ``group``'s corrected share of ``label`` with its CI (None: the group has no judged items)."""
    if group not in correction.point:
        return None
    j = correction.labels.index(label)
    return interval(correction.replicates[group][:, j], float(correction.point[group][j]), confidence)


def disparity(correction: GroupCorrection, groups: Sequence[str], label: str) -> tuple[float, np.ndarray] | None:
    """max - min of the groups' corrected shares of ``label``, and the same in every replicate (None: < 2 groups).

    The replicates share their calibration draw across groups (``corrected_shares_by_group``), so
    the interval carries the judge's measured errors once, as they act on every group together.
    """
    present = [group for group in groups if group in correction.point]
    if len(present) < 2:
        return None
    j = correction.labels.index(label)
    points = np.array([correction.point[group][j] for group in present])
    draws = np.stack([correction.replicates[group][:, j] for group in present])
    return float(points.max() - points.min()), draws.max(axis=0) - draws.min(axis=0)
