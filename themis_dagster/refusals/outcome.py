"""Refusals as an outcome: every generation and chat task marks its judgments, one function counts them.

A task's ``judge`` reads each reply with its own rules, as before, and ``mark_refusal`` adds the
detector's verdict (``Judgment.refused``, the ``judgments.refused`` column) without touching the
judgment's outcome or score: a task's own metrics keep the values they had, so a result computed
before the detector existed stays comparable. ``refusal_metrics`` then adds, beside the task's
metrics (the ``bias_metrics`` stage calls it for every task whose judgments were marked):

- ``refused_rate``: the share of all the task's judgments whose reply the detector marked refused
  (a judgment without a reply, an engine failure, counts as not refused), overall and per subset;
- ``n_answered``: how many judgments were not refused (value), out of all (``n``), overall and per
  subset: the denominator the answered-only metrics start from (a task's own rules may leave out
  unparsed replies too, as they do for its headline; each row's ``n`` says how many it used);
- ``<metric>_answered``: each of the task's metrics recomputed by the task over the judgments
  not refused, so that a refusal is never counted as an answer. Where nothing was refused they
  are the task's values (same inputs). GenderBench's marks (``<metric>_mark``, the ``marks``
  hook) grade the published metric over all items and have no answered-only variant.

The task's own metrics stay the headline, over all items, as their published definitions say
(GenderBench counts a refusal as an undetected answer); the answered-only variants are beside them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace

import polars as pl

from themis_dagster.refusals.detector import FALLBACK_LANGUAGE, detect_refusal
from themis_dagster.tasks.scoring import metric_by_subset_frame
from themis_dagster.tasks.spec import Judgment, MetricValue, Response, TaskParams

REFUSED_RATE = "refused_rate"
N_ANSWERED = "n_answered"
ANSWERED = "_answered"


def mark_refusal(judgment: Judgment, replies: Iterable[str | None], language: str = FALLBACK_LANGUAGE) -> Judgment:
    """``judgment`` with the detector's verdict on its replies: refused when any of them refuses.

    ``replies`` are the texts the judgment read (one for most tasks; a LangBiTe group reads
    several); None stands for no reply (an engine failure). No reply read: ``refused`` None. A
    refusal's phrase and rule go into ``detail`` (``refusal_verdict``), so a reader can see why.
    """
    verdicts = [detect_refusal(text, language) for text in replies if text is not None]
    if not verdicts:
        return judgment
    refusal = next((verdict for verdict in verdicts if verdict.refused), None)
    if refusal is None:
        return replace(judgment, refused=False)
    why = {"phrase": refusal.phrase, "rule": refusal.rule, "language": refusal.language}
    return replace(judgment, refused=True, detail=judgment.detail | {"refusal_verdict": why})


def replies_by(responses: Iterable[Response], key: str = "item_id") -> dict[str, list[str | None]]:
    """Each item's (``key="request_id"``: each request's) reply texts; a failed request's is None."""
    replies: dict[str, list[str | None]] = defaultdict(list)
    for response in responses:
        replies[getattr(response, key)].append(response.text if response.error is None else None)
    return dict(replies)


def mark_refusals(
    judgments: Sequence[Judgment], replies: Mapping[str, Sequence[str | None]], language: str = FALLBACK_LANGUAGE
) -> list[Judgment]:
    """Every judgment marked (``mark_refusal``) with the replies it read, found by its ``item_id`` in ``replies``."""
    return [mark_refusal(judgment, replies.get(judgment.item_id, ()), language) for judgment in judgments]


def marked(judgments: pl.DataFrame) -> bool:
    """Whether a task marked these judgments (a ``judgments`` frame): some reply was read for refusals."""
    return "refused" in judgments.columns and bool(judgments.get_column("refused").is_not_null().any())


def answered_name(metric: str) -> str:
    """The answered-only variant's name: ``<metric>_answered``."""
    return metric + ANSWERED


def refusal_metrics(
    judgments: pl.DataFrame,
    task_values: list[MetricValue],
    metrics_of: Callable[[pl.DataFrame], list[MetricValue]],
    params: TaskParams,
    marks: Collection[str] = (),
) -> list[MetricValue]:
    """``refused_rate``, ``n_answered`` and every task metric over the answered judgments (module docstring).

    ``task_values`` are the task's metrics over all ``judgments``; ``metrics_of`` computes the
    task's metrics over a ``judgments`` frame (the stage's own path: records or columnar);
    ``marks`` names the metrics that are marks of others (GenderBench's ``<metric>_mark``), left out.
    """
    refused = pl.col("refused").fill_null(False)
    rates = metric_by_subset_frame(REFUSED_RATE, judgments, refused.cast(pl.Float64), params)
    answered = judgments.filter(~refused)
    # nothing refused: the same judgments give the same values, not computed twice
    recomputed = task_values if answered.height == judgments.height else metrics_of(answered)
    variants = [replace(value, metric=answered_name(value.metric)) for value in recomputed if value.metric not in marks]
    return [*rates, *_answered_counts(judgments), *variants]


def _answered_counts(judgments: pl.DataFrame) -> list[MetricValue]:
    """``n_answered`` overall and per subset: judgments not refused (value) of all judgments (``n``)."""
    flags = judgments.select("subset", (~pl.col("refused").fill_null(False)).alias("_answered"))
    rows = [MetricValue(None, N_ANSWERED, float(flags.get_column("_answered").sum()), None, None, flags.height)]
    for subset in sorted(flags.get_column("subset").drop_nulls().unique().to_list()):
        group = flags.filter(pl.col("subset") == subset).get_column("_answered")
        rows.append(MetricValue(subset, N_ANSWERED, float(group.sum()), None, None, group.len()))
    return rows
