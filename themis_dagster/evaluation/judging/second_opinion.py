"""Judging step 3: a second registered model, or a panel of them, re-judges what the task's rules left open.

Only for a task whose ``SECOND_OPINION`` its params give a judge (``LoadedTask.judge_model``:
LangBiTe's useLLMEval, BOLD's regard and toxicity); only then may the judgments stage load an
engine, the judge's, and only for questions the request cache has no answer to. A ``JudgePanel``
(BOLD's ``panel_judges``) has every judge asked the same questions in turn, one engine at a time,
each judge's answers under its own fingerprint.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from themis_dagster.evaluation.answering import Answerers, AnswerStats
from themis_dagster.exchange import Request, Response
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Judgment


@dataclass
class Opinions:
    """The judgments after the second opinion, the questions asked (per judge, summed) and the judges' answering."""

    judgments: list[Judgment]
    questions: int = 0
    answering: AnswerStats = field(default_factory=AnswerStats)


def second_opinion(task: LoadedTask, judgments: list[Judgment], answerers: Answerers) -> Opinions:
    """The judgments re-decided by the task's judge or judges; unchanged where the params name no judge."""
    opinion, judge_model = task.second_opinion, task.judge_model
    if opinion is None or not judge_model:
        return Opinions(judgments)
    asks: list[Request] = opinion.requests(judgments, task.params)
    if not asks:
        return Opinions(judgments)
    judges = task.judges
    answers: dict[str, list[Response]] = {}
    stats = AnswerStats()
    for judge in judges:  # one engine at a time
        answers[judge], judge_stats = answerers(judge).answer(asks, retries=task.params.retries())
        stats.add(judge_stats)
    if (panel := task.judge_panel) is not None:
        return Opinions(panel.apply_panel(judgments, asks, answers, task.params), len(asks) * len(judges), stats)
    return Opinions(opinion.apply(judgments, asks, answers[judge_model], task.params), len(asks), stats)
