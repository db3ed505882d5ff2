"""The judgments stage as one explicit pipeline: guard -> judge -> second opinion or panel -> refusal judge -> relabel.

1. ``guard_replies`` (``reply_guard.py``): chat replies that are no answer (reasoning unfinished,
   truncated) reach no parser; on only for a model that declares reasoning or replies that carry it.
2. ``judge_frame`` / ``judge_records`` (``task_judge.py``): the task's own rules.
3. ``second_opinion`` (``second_opinion.py``): a judge model, or a panel, re-judges what they left open.
4. ``refusal_judge`` (``refusal_judge.py``): a refusal judge model decides ``refused``.
5. ``relabel`` (``reply_guard.py``): a judgment that failed because the guard withheld its reply takes
   the guard's outcome.

Each step is a plain function that passes what it does not apply to through unchanged; the
judgments stage calls ``judge_partition`` and writes what it returns. Steps 4 and 5 touch
different columns (``refused``; ``outcome``), so their order changes no row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from themis_dagster.evaluation.answering import Answerers, AnswerStats
from themis_dagster.evaluation.judging.refusal_judge import refusal_judge
from themis_dagster.evaluation.judging.reply_guard import guard_replies, relabel
from themis_dagster.evaluation.judging.second_opinion import second_opinion
from themis_dagster.evaluation.judging.task_judge import judge_frame, judge_records, judged_in_chunks
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.stage_io import chunked, stage_frame
from themis_dagster.tasks.loader import LoadedTask


@dataclass
class PartitionReplies:
    """What the judgments stage reads of its partition: items and responses, and its prompts when a step asks.

    ``prompts`` may be read beforehand (where the task's ``judge`` reads them); else ``read_prompts``
    reads them the first time a step asks.
    """

    items: pl.DataFrame
    responses: pl.DataFrame
    read_prompts: Callable[[], pl.DataFrame]
    prompts: pl.DataFrame | None = None

    def the_prompts(self) -> pl.DataFrame:
        if self.prompts is None:
            self.prompts = self.read_prompts()
        return self.prompts


@dataclass
class Judged:
    """The partition's judgments and what the pipeline did to reach them."""

    frame: pl.DataFrame
    withheld: dict[str, int] | None = None
    """Replies the guard withheld, per outcome (None: it withheld none)."""
    second_opinions: int = 0
    refusal_questions: int = 0
    answering: AnswerStats = field(default_factory=AnswerStats)
    """The judge models' answering (second opinion and refusal judge together)."""


def judge_partition(
    task: LoadedTask,
    key: EvaluationPartition,
    replies: PartitionReplies,
    *,
    declares_reasoning: bool,
    answerers: Answerers,
) -> Judged:
    """The partition's judgments frame, its five steps in order (module docstring).

    ``declares_reasoning``: the evaluated model declares ``reasoning:`` (the guard is on for it);
    ``answerers``: the answering path of each judge model, by id (asked only where a step applies).
    """
    guarded = guard_replies(replies.responses, declares_reasoning)  # 1
    responses = guarded.responses
    answering = AnswerStats()
    second_opinions = 0
    if judged_in_chunks(task):
        frame = judge_frame(task, key, replies.items, replies.the_prompts, responses)  # 2
    else:
        records = judge_records(task, replies.items, replies.the_prompts(), responses)  # 2
        opinions = second_opinion(task, records, answerers)  # 3
        del records
        second_opinions = opinions.questions
        answering.add(opinions.answering)
        frame = stage_frame("judgments", key, chunked(opinions.judgments))
    refusals = refusal_judge(task, frame, replies.the_prompts, responses, answerers)  # 4
    answering.add(refusals.answering)
    frame = relabel(refusals.judgments, guarded)  # 5
    withheld = guarded.counts() if guarded.withheld else None
    return Judged(frame, withheld, second_opinions, refusals.questions, answering)
