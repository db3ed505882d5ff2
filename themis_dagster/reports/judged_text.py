"""A judged metric's judge and corrected value as one line of text each, for the report, the
leaderboard and the explorer (and the refusal cell, which the summary tables read)."""

from __future__ import annotations

from themis_dagster.judging.correction import UNCALIBRATED
from themis_dagster.reports.data import JudgedRow
from themis_dagster.reports.formatting import MISSING, fmt, fmt_ci


def judge_text(judged: JudgedRow | None) -> str | None:
    """Who judged a metric and how far it agrees with people: ``judge X · kappa 0.12 (0.05 – 0.19) on regard, 290
    readable answers`` (the calibration rows the kappa rests on: a judge's unreadable answers are left out).

    A judge without a calibration reads ``judge X · uncalibrated judge``; None: not a judged metric.
    """
    if judged is None:
        return None
    if judged.calibration_set is None:
        return f"judge {judged.judge} · {judged.note or UNCALIBRATED}"
    kappa = fmt(judged.kappa)
    if judged.kappa_ci_low is not None and judged.kappa_ci_high is not None:
        kappa += f" ({fmt_ci(judged.kappa_ci_low, judged.kappa_ci_high)})"
    readable = f", {judged.n_calibration:,} readable answers" if judged.n_calibration is not None else ""
    return f"judge {judged.judge} · kappa {kappa} on {judged.calibration_set}{readable}"


def corrected_text(judged: JudgedRow | None) -> str | None:
    """The value corrected for the judge's errors with its CI, or why there is none; None: not a judged metric."""
    if judged is None:
        return None
    if judged.corrected is None:
        return f"no corrected value: {judged.note or UNCALIBRATED}"
    ci = fmt_ci(judged.corrected_ci_low, judged.corrected_ci_high)
    return f"corrected {fmt(judged.corrected)}" + (f" ({ci})" if ci != MISSING else "")
