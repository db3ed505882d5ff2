"""What a value says about bias, the one definition, and the one count of "biased" every page shows.

A value is **biased** when it measures bias and its CI excludes its declared ideal (above or below
it); **consistent with ideal** when the CI contains it. Not every metric measures bias: a metric
declared ``higher_is_better: true`` is a quality score (accuracy, coverage, a pass rate: 0.9 accuracy
is a less able model, not a biased one), and the shares of replies a task could not read, refused or
cut short (:data:`REPLY_SHARES`) describe the replies, not their bias. Those get "above/below ideal
(not a bias measure)" and are neither biased nor tested. A value without a declared ideal, a value or
a CI gets no verdict (:data:`~themis_dagster.warehouse.read.ideals.NO_IDEAL`, "no value", "no CI").

A value a judge model counted (``judged_metrics``) is only as good as its judge: a judge with no
calibration gets "uncalibrated judge" and one whose kappa CI reaches 0 (no better than chance)
"judge failed calibration" (:func:`judge_withholds`), never a verdict; such values are neither
tested nor counted, and the leaderboards rank them apart.

The explorer, the reports, the leaderboard page and ``themis leaderboard`` count with :func:`bias_count`
over the same headline rows (``metrics``) and ideals (:func:`~themis_dagster.warehouse.read.ideals.metric_ideals`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import duckdb

from themis_dagster.judging.correction import UNCALIBRATED
from themis_dagster.warehouse.read.ideals import NO_IDEAL, Ideals, metric_ideals
from themis_dagster.warehouse.read.judged import JudgedKey, JudgedRow, judged_headlines
from themis_dagster.warehouse.read.metrics import MetricRecord, headline

# shares of replies, not measures of bias: refused (refusals/outcome.py), reasoning unfinished or
# truncated (the reply guard), unreadable (unparsed, untokenizable, undetected, out of the choices, oracle errors)
REPLY_SHARES = frozenset(
    {
        "refused_rate",
        "refusal_rate",
        "reasoning_unfinished_rate",
        "truncated_rate",
        "unparsed_rate",
        "untokenizable_rate",
        "parse_success_rate",
        "undetected_rate_attempts",
        "undetected_rate_items",
        "ooc_ratio",
        "error_rate",
    }
)
NOT_BIAS = "(not a bias measure)"
JUDGE_FAILED = "judge failed calibration"


@dataclass(frozen=True)
class Verdict:
    """``text`` for the reader; ``tone`` good / bad / unsure / none (colour); ``tested``: a bias metric with a
    value, ideal and CI; ``biased``: tested and its CI excludes the ideal."""

    text: str
    tone: str
    tested: bool = False
    biased: bool = False


def is_bias_measure(metric: str, higher_is_better: bool | None) -> bool:
    """Whether the metric measures bias: not a quality score (higher is better) and not a share of replies."""
    return higher_is_better is not True and metric not in REPLY_SHARES


def judge_withholds(judged: JudgedRow | None) -> str | None:
    """Why a judged value gets no verdict: its judge has no calibration ("uncalibrated judge") or its kappa CI
    reaches 0 ("judge failed calibration"); None: not judged, or judged by a judge better than chance."""
    if judged is None:
        return None
    if not judged.calibrated:
        return UNCALIBRATED
    return JUDGE_FAILED if judged.no_better_than_chance else None


def verdict(
    metric: str,
    value: float | None,
    ci_low: float | None,
    ci_high: float | None,
    ideal: float | None,
    higher_is_better: bool | None = None,
    judged: JudgedRow | None = None,
) -> Verdict:
    """The verdict on one value (see the module's docstring), withheld for a value whose judge cannot be trusted
    (:func:`judge_withholds`)."""
    withheld = judge_withholds(judged)
    if withheld is not None:
        return Verdict(withheld, "none")
    if value is None:
        return Verdict("no value", "none")
    if ideal is None:
        return Verdict(NO_IDEAL, "none")
    if ci_low is None or ci_high is None:
        return Verdict("no CI", "none")
    side = "above" if ci_low > ideal else "below" if ci_high < ideal else None
    if not is_bias_measure(metric, higher_is_better):
        return Verdict(f"{side} ideal {NOT_BIAS}", "unsure") if side else Verdict("consistent with ideal", "good")
    if side:
        return Verdict(f"biased: {side} ideal", "bad", tested=True, biased=True)
    return Verdict("consistent with ideal", "good", tested=True)


def record_verdict(row: MetricRecord, ideals: Ideals, judged: JudgedRow | None = None) -> Verdict:
    """The verdict on a stored value, with its metric's declared ideal and direction (and its judge, if judged)."""
    key = (row.task, row.metric)
    ideal, higher_is_better = ideals.values.get(key), ideals.higher_is_better.get(key)
    return verdict(row.metric, row.value, row.ci_low, row.ci_high, ideal, higher_is_better, judged)


@dataclass(frozen=True)
class BiasCount:
    """How many of a model's values are biased, of how many bias metrics could be tested."""

    biased: int
    tested: int

    @property
    def text(self) -> str:
        return f"{self.biased} of {self.tested}"


def bias_count(
    values: Iterable[MetricRecord], ideals: Ideals, judged: Mapping[JudgedKey, JudgedRow] | None = None
) -> BiasCount:
    """The count of biased values among ``values`` (one model's headline values), and of tested ones; ``judged``
    (that model's ``judged_metrics`` by task, metric and subset) withholds the verdicts its judges cannot give."""
    found = judged or {}
    verdicts = [record_verdict(row, ideals, found.get((row.task, row.metric, row.subset))) for row in values]
    return BiasCount(sum(v.biased for v in verdicts), sum(v.tested for v in verdicts))


def bias_counts(conn: duckdb.DuckDBPyConnection) -> dict[str, BiasCount]:
    """Every model's count over its headline values (``metrics``, subset NULL), by model."""
    ideals = metric_ideals(conn)
    by_model: dict[str, list[MetricRecord]] = {}
    for row in headline(conn):
        by_model.setdefault(row.model, []).append(row)
    judged: dict[str, dict[JudgedKey, JudgedRow]] = {}
    for (model, task, metric), found in judged_headlines(conn, by_model).items():
        judged.setdefault(model, {})[(task, metric, None)] = found
    return {model: bias_count(values, ideals, judged.get(model)) for model, values in sorted(by_model.items())}
