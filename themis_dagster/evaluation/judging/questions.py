"""Which judge question each calibration set checks, and what a task's judge offers to be checked.

A calibration set (``judging/calibration_sets.py``) holds human labels of one kind (regard,
refusal); it checks the judge question that gives labels of that kind. A task's judge is asked
through its task's own ``SecondOpinion`` (the same template, sampling settings and answer
reading as in the task), so what is measured is the judge as the task uses it; the refusal
judge (``refusals/judge.py``), which a task asks when it names a ``refusal_judge_model``,
is asked with its own settings there and here.

``calibrated_questions`` names, per calibration set, the task and question kind: the published
sets (regard: BOLD's regard question; xstest: the refusal judge) and the sets a user declares
(``judging/user_sets.py``). Its keys are the calibration asset's static partition dimension.
What a judge offers to be checked is the task contract's ``CalibratedJudge`` (``tasks/spec.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from themis_dagster.errors import ConfigError
from themis_dagster.judging.calibration_sets import CalibrationSet, load_regard, load_xstest
from themis_dagster.judging.user_sets import DeclaredCsvSet, read_declared_sets
from themis_dagster.refusals.judge import REFUSAL_KIND as REFUSAL
from themis_dagster.refusals.judge import RefusalJudge
from themis_dagster.settings import Settings
from themis_dagster.tasks.family import load_families
from themis_dagster.tasks.spec import CalibratedJudge


class JudgeQuestion(NamedTuple):
    """The question a calibration set checks: task ``task``'s judge asked question ``kind``.

    ``task`` None: a judge of no one task (the refusal judge, any task's ``refusal_judge_model``), asked with
    its own settings.
    """

    task: str | None
    kind: str


# The published calibration sets, each read by its loader (judging/calibration_sets.py).
PUBLISHED_SETS = {"regard": load_regard, "xstest": load_xstest}


def _published_questions() -> dict[str, JudgeQuestion]:
    """The published calibration sets and the question each checks: the families' (``calibration_sets`` of their
    ``family.yaml``: regard checks BOLD's regard question), then the refusal judge's (xstest)."""
    questions: dict[str, JudgeQuestion] = {}
    for family in load_families().values():
        for name, question in family.spec.calibration_sets.items():
            if name not in PUBLISHED_SETS:
                raise ConfigError(
                    f"family {family.name!r}: calibration_sets.{name}: no published calibration set of that name; "
                    f"known: {', '.join(PUBLISHED_SETS)}"
                )
            questions[name] = JudgeQuestion(question.task, question.question)
    return questions | {"xstest": JudgeQuestion(None, REFUSAL)}


CALIBRATED_QUESTIONS: dict[str, JudgeQuestion] = _published_questions()


def standalone_judge(kind: str) -> RefusalJudge:
    """The judge of a question of no one task (``JudgeQuestion.task`` None), with its own asking settings."""
    if kind != REFUSAL:
        raise ConfigError(f"judge question {kind!r}: no task asks it and no standalone judge answers it")
    return RefusalJudge()


def declared_sets(settings: Settings | None = None) -> dict[str, DeclaredCsvSet]:
    """The user's calibration sets (``Settings.calibration_sets_file``), by name."""
    settings = settings or Settings.from_env()
    return {entry.name: entry for entry in read_declared_sets(settings.calibration_sets_file)}


def calibrated_questions(settings: Settings | None = None) -> dict[str, JudgeQuestion]:
    """Every calibration set and the judge question it checks: the published ones, then the user's.

    A user's set named like a published one, or checking a question no standalone judge answers
    without naming a task, fails here (when the definitions load), before any engine starts.
    """
    questions = dict(CALIBRATED_QUESTIONS)
    for name, entry in declared_sets(settings).items():
        if name in questions:
            raise ConfigError(f"calibration set {name!r}: field 'name' is taken by a published calibration set")
        questions[name] = JudgeQuestion(entry.task, entry.question)
    return questions


def calibration_set_names(settings: Settings | None = None) -> tuple[str, ...]:
    """The calibration sets a judge can be calibrated on (the calibration asset's partitions)."""
    return tuple(calibrated_questions(settings))


def sets_checking(task: str, judge: CalibratedJudge, settings: Settings | None = None) -> dict[str, str]:
    """Per question kind of ``task``'s judge, the calibration set that checks it.

    The judge's own set first (BOLD's regard: ``regard``); for a kind without one, the first
    user set declared for that task and kind (BOLD's toxicity: a user's labelled CSV).
    """
    found: dict[str, str] = {}
    for name, question in calibrated_questions(settings).items():
        if question.task == task:
            found.setdefault(question.kind, name)
    return found | dict(judge.calibration_sets)


def load_calibration_set(
    name: str, *, datasets_dir: Path, cache_dir: Path, allow_download: bool = False, settings: Settings | None = None
) -> CalibrationSet:
    """The named calibration set, read and validated (regard: Sheng et al.'s three splits, 301 texts; xstest:
    the five models' 2,250 labelled replies, 2,240 once exact repeats are dropped; a user's declared CSV)."""
    if name in CALIBRATED_QUESTIONS:
        found = Settings(datasets_dir=datasets_dir, cache_dir=cache_dir)
        return PUBLISHED_SETS[name](settings=found, allow_download=allow_download)
    settings = settings or Settings.from_env()
    declared = declared_sets(settings)
    if name in declared:
        return declared[name].load(settings.calibration_sets_file.parent)
    raise ConfigError(f"calibration_set: {name!r} is not declared; known: {', '.join(calibration_set_names(settings))}")


def judge_labels(judge: CalibratedJudge, kind: str, calibration_set: str) -> tuple[str, ...]:
    """The labels of the judge's question ``kind``; a set declared for a question the judge never asks fails."""
    try:
        return judge.labels(kind)
    except KeyError:
        raise ConfigError(
            f"calibration set {calibration_set!r}: field 'question' is {kind!r}, which the task's judge never asks"
        ) from None


def check_judge_labels(judge: CalibratedJudge, kind: str, calibration: CalibrationSet) -> None:
    """A calibration set whose labels are not exactly the judge's fails naming the field (not a silent mismatch)."""
    given, declared = set(judge_labels(judge, kind, calibration.name)), set(calibration.labels)
    if given != declared:
        raise ConfigError(
            f"calibration set {calibration.name!r}: field 'labels' is {sorted(declared)}, but the judge's "
            f"{kind!r} question answers {sorted(given)}"
        )
