"""The one guard between an engine's replies and every task's parser: a reply that is no answer is withheld.

The judgments stage (``assets/evaluation.py``) passes the partition's responses through
``guard_replies`` before any task's ``judge`` (or ``judge_frame``, or second opinion) reads them,
and its judgments through ``relabel`` after. Two kinds of chat replies are withheld (a plain
completion, BOLD's, is a continuation its cap cuts by design, and is never withheld):

- ``reasoning_unfinished``: a reasoning model's reply whose reasoning never ended within its
  budget -- the parser found reasoning (an opened block) but no answer after it;
- ``truncated``: a reply whose answer hit its token cap (``finish_reason == "length"``).

A withheld reply reaches the task as an engine failure (``text`` None, ``error`` naming the
outcome), which every task already records without parsing it (``engine_error``,
``missing_response``, LangBiTe's ``error_engine_error``); ``relabel`` then gives such a judgment
the guard's outcome where the guard is why it failed (a judgment per attempt: its request was
withheld; a judgment per item: some of its replies were withheld and none failed otherwise). A
task that records engine failures under another outcome keeps it; the reply is still never parsed.
No task reads ``reasoning``: the guard blanks it (the sentinel test in tests/tasks/test_reasoning_split.py).

The guard is on for a model that declares ``reasoning:`` and wherever a reply carries reasoning
(a server that splits replies itself); for other models replies pass unchanged, so no existing
result changes. ``withheld_rates`` are the per-task counts: ``reasoning_unfinished_rate`` and
``truncated_rate`` beside the task's metrics, overall and per subset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from themis_dagster.tasks.scoring import metric_by_subset_frame
from themis_dagster.tasks.spec import MetricValue

REASONING_UNFINISHED = "reasoning_unfinished"
TRUNCATED = "truncated"
GUARD_OUTCOMES = (REASONING_UNFINISHED, TRUNCATED)
# What tasks call a reply that never came or failed: a judgment the guard may rename.
FAILURE_OUTCOMES = ("engine_error", "missing_response", "error_engine_error", "error_missing_response")
# The replies guarded: chat replies, where a reply is an answer. A plain completion (BOLD's) is a
# continuation that its token cap cuts by design, and no engine splits reasoning out of one.
GUARDED = ("chat",)


# Tasks may store this text (an engine failure's error) in their judgments: it keeps the module's
# first path so that stored rows stay the same.
_WITHHELD = ": not an answer, withheld from the task's parser (evaluation/judging/reply_guard.py)"


def withheld_error(outcome: str) -> str:
    """The ``error`` a withheld reply carries to the task (its first word is the outcome)."""
    return outcome + _WITHHELD


@dataclass(frozen=True)
class Guarded:
    """The responses as the task may read them, and which replies were withheld."""

    responses: pl.DataFrame
    withheld: dict[str, str] = field(default_factory=dict)  # request_id -> outcome
    by_item: dict[str, str] = field(default_factory=dict)  # item_id -> outcome, where no other reply failed

    def counts(self) -> dict[str, int]:
        """Withheld replies per outcome (both outcomes, zero where none)."""
        values = list(self.withheld.values())
        return {outcome: values.count(outcome) for outcome in GUARD_OUTCOMES}


def _outcome() -> pl.Expr:
    """Each response's guard outcome (NULL: an answer, or not a chat reply)."""
    generated = pl.col("error").is_null() & pl.col("request_type").is_in(GUARDED)
    no_answer = pl.col("text").fill_null("").str.strip_chars() == ""
    return (
        pl.when(generated & pl.col("reasoning").is_not_null() & no_answer)
        .then(pl.lit(REASONING_UNFINISHED))
        .when(generated & (pl.col("finish_reason") == "length"))
        .then(pl.lit(TRUNCATED))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def guard_on(responses: pl.DataFrame, declares_reasoning: bool) -> bool:
    """Whether the guard applies: the model declares reasoning, or some reply carries reasoning."""
    return declares_reasoning or bool(responses.get_column("reasoning").is_not_null().any())


def guard_replies(responses: pl.DataFrame, declares_reasoning: bool) -> Guarded:
    """``responses`` (a ``responses`` frame) with every reply that is no answer withheld and no reasoning shown.

    Off (``guard_on``): the frame unchanged.
    """
    if not guard_on(responses, declares_reasoning):
        return Guarded(responses)
    marked = responses.with_columns(_outcome().alias("_withheld"))
    withheld_rows = marked.filter(pl.col("_withheld").is_not_null())
    withheld = dict(
        zip(withheld_rows.get_column("request_id").to_list(), withheld_rows.get_column("_withheld").to_list(),
            strict=True)
    )  # fmt: skip
    failed_items = set(marked.filter(pl.col("error").is_not_null()).get_column("item_id").to_list())
    by_item: dict[str, str] = {}
    for item_id, outcome in zip(
        withheld_rows.get_column("item_id").to_list(), withheld_rows.get_column("_withheld").to_list(), strict=True
    ):
        if item_id not in failed_items and by_item.get(item_id) != REASONING_UNFINISHED:
            by_item[item_id] = outcome
    shown = marked.with_columns(
        pl.when(pl.col("_withheld").is_not_null()).then(None).otherwise(pl.col("text")).alias("text"),
        pl.when(pl.col("_withheld").is_not_null())
        .then(pl.col("_withheld") + pl.lit(_WITHHELD))
        .otherwise(pl.col("error"))
        .alias("error"),
        pl.lit(None, dtype=pl.String).alias("reasoning"),
        pl.lit(None, dtype=pl.Int32).alias("n_reasoning_tokens"),
    ).drop("_withheld")
    return Guarded(shown.select(responses.columns), withheld, by_item)


def relabel(judgments: pl.DataFrame, guarded: Guarded) -> pl.DataFrame:
    """``judgments`` (a ``judgments`` frame) with the guard's outcome where a withheld reply is why one failed."""
    if not guarded.withheld:
        return judgments
    own = pl.col("item_id").replace_strict(guarded.withheld, default=None, return_dtype=pl.String)
    items = pl.col("item_id").replace_strict(guarded.by_item, default=None, return_dtype=pl.String)
    label = pl.coalesce(own, items)
    failed = ~pl.col("parsed") & pl.col("outcome").is_in(FAILURE_OUTCOMES)
    return judgments.with_columns(
        pl.when(failed & label.is_not_null()).then(label).otherwise(pl.col("outcome")).alias("outcome")
    )


def withheld_rates(judgments: pl.DataFrame, params: Any) -> list[MetricValue]:
    """``reasoning_unfinished_rate`` and ``truncated_rate``: shares of the task's judgments, overall and per subset."""
    return [
        value
        for outcome in GUARD_OUTCOMES
        for value in metric_by_subset_frame(
            f"{outcome}_rate", judgments, (pl.col("outcome") == outcome).cast(pl.Float64), params
        )
    ]
