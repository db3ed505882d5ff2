"""Refusal and unfinished-reasoning rates of each task, shown beside its headline values.

A headline value rests on the replies a task could read: when a model refused a fifth of the
items, or reasoned past its budget on half of them, the value says less than it seems to. The
``bias_metrics`` stage records those shares as metrics of their own (``refused_rate``,
``refusals/outcome.py``; ``reasoning_unfinished_rate`` and ``truncated_rate``,
``evaluation/judging/reply_guard.py``); the report lifts them out of the metric list and sets them beside
every headline value of their task, so no reader sees a bias score without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from themis_dagster.evaluation.judging.reply_guard import REASONING_UNFINISHED, TRUNCATED
from themis_dagster.refusals.outcome import REFUSED_RATE
from themis_dagster.reports.data import JudgedKey, JudgedRow, MetricRow
from themis_dagster.reports.formatting import MISSING
from themis_dagster.reports.judged_text import corrected_text, judge_text

UNFINISHED_RATE = f"{REASONING_UNFINISHED}_rate"
TRUNCATED_RATE = f"{TRUNCATED}_rate"
REPLY_OUTCOME_METRICS = (REFUSED_RATE, UNFINISHED_RATE, TRUNCATED_RATE)


@dataclass(frozen=True)
class ReplyOutcomes:
    """A task's shares of refused, unfinished-reasoning and truncated replies (None: not recorded)."""

    task: str
    refused: MetricRow | None = None
    unfinished: MetricRow | None = None
    truncated: MetricRow | None = None
    refused_judged: JudgedRow | None = None  # a refusal judge counted them (a task's refusal_judge_model)

    @property
    def refused_text(self) -> str:
        """``12.5% of 40``; decided by a refusal judge: its corrected value (or why none) and its kappa beside it."""
        if self.refused_judged is None:
            return share_text(self.refused)
        return f"{share_text(self.refused)} · {corrected_text(self.refused_judged)} · {judge_text(self.refused_judged)}"

    @property
    def unfinished_text(self) -> str:
        """Unfinished reasoning and truncated answers in one cell: both are replies the task never read."""
        if self.unfinished is None and self.truncated is None:
            return MISSING
        return f"{share_text(self.unfinished)} unfinished · {share_text(self.truncated)} truncated"


def is_reply_outcome(metric: str) -> bool:
    """Whether ``metric`` is one of the shares shown beside the headline values rather than among them."""
    return metric in REPLY_OUTCOME_METRICS


def share_text(row: MetricRow | None) -> str:
    """``12.5% of 40``: the share as a percentage with its denominator; ``—`` when not recorded."""
    if row is None or row.value is None:
        return MISSING
    return f"{100.0 * row.value:.1f}% of {row.n:,}"


OutcomeKey = tuple[str, str | None]  # (task, subset); subset None: the whole task


def reply_outcomes(
    rows: Sequence[MetricRow], judged: Mapping[JudgedKey, JudgedRow] | None = None
) -> dict[OutcomeKey, ReplyOutcomes]:
    """The reply-outcome shares among ``rows`` per task and subset (``refused_rate`` is recorded per subset too);
    ``judged``: the model's judged metrics, where a refusal judge's ``refused_rate`` has its correction."""
    found: dict[OutcomeKey, dict[str, MetricRow]] = {}
    for row in rows:
        if is_reply_outcome(row.metric):
            found.setdefault((row.task, row.subset), {})[row.metric] = row
    judged = judged or {}
    return {
        key: ReplyOutcomes(
            key[0],
            shares.get(REFUSED_RATE),
            shares.get(UNFINISHED_RATE),
            shares.get(TRUNCATED_RATE),
            judged.get((key[0], REFUSED_RATE, key[1])),
        )
        for key, shares in found.items()
    }
