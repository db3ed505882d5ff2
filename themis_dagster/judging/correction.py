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

from dataclasses import dataclass

from themis_dagster.stats import Estimate


@dataclass(frozen=True)
class JudgeCalibration:
    """One judge measured on one calibration set: the paired (human, judge) labels of its readable rows."""

    judge: str
    calibration_set: str
    labels: tuple[str, ...]
    human: tuple[str, ...]
    judged: tuple[str, ...]
    kappa: Estimate | None = None
