"""Judging step 4: a task's ``refusal_judge_model`` decides which replies refuse, in place of the phrase lists.

Only for a task whose params name a refusal judge and whose judgments the task marked (some
reply was read for refusals). The judge is asked XSTest's classifier question about every
reply through the answering path (its own engine and request cache), as in its calibration on
XSTest (``refusals/judged.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from themis_dagster.evaluation.answering import Answerers, AnswerStats
from themis_dagster.refusals.judge import RefusalJudge, read_refusal_class
from themis_dagster.refusals.judged import judge_refusals, refusal_requests
from themis_dagster.refusals.outcome import marked
from themis_dagster.tasks.loader import LoadedTask


@dataclass
class RefusalVerdicts:
    """The judgments with the judge's ``refused``, the questions it was asked and its answering."""

    judgments: pl.DataFrame
    questions: int = 0
    answering: AnswerStats = field(default_factory=AnswerStats)


def asks_refusal_judge(task: LoadedTask, judgments: pl.DataFrame) -> bool:
    """Whether a model decides the refusals: the params name one and the task marked its judgments."""
    return bool(task.params.refusal_judge_model) and marked(judgments)


def refusal_judge(
    task: LoadedTask,
    judgments: pl.DataFrame,
    prompts: Callable[[], pl.DataFrame],
    responses: pl.DataFrame,
    answerers: Answerers,
) -> RefusalVerdicts:
    """``judgments`` with ``refused`` decided by the refusal judge (unchanged where ``asks_refusal_judge`` is not
    so); ``prompts`` are read only then, for the question each reply answered."""
    judge_model = task.params.refusal_judge_model
    if not judge_model or not marked(judgments):
        return RefusalVerdicts(judgments)
    asks = refusal_requests(prompts(), responses, RefusalJudge())
    if not asks:
        return RefusalVerdicts(judgments)
    answers, stats = answerers(judge_model).answer(asks, retries=task.params.retries())
    labels = {
        ask.request_id.removesuffix(":refusal"): read_refusal_class(None if reply.error else reply.text)
        for ask, reply in zip(asks, answers, strict=True)
    }
    return RefusalVerdicts(judge_refusals(judgments, responses, labels), len(asks), stats)
