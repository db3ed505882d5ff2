"""Judges' stored calibrations, as the metrics stage reports judged metrics beside them.

The ``judge_calibration`` asset stores each judge's labels and agreement on a calibration set
(``judge_calibration_labels``, ``judge_calibration_metrics``). Here they are read back as a
``JudgeCalibration`` per question kind of a task's calibrated judge (``CalibratedJudge``), or of
its panel's majority where the majority is the verdict, and for a refusal judge on XSTest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from themis_dagster.evaluation.judging.questions import judge_labels, sets_checking
from themis_dagster.evaluation.stage_io import Warehouse
from themis_dagster.judging.calibration_sets import XSTEST_LABELS
from themis_dagster.judging.correction import JudgeCalibration
from themis_dagster.refusals.judged import CALIBRATION_SET as REFUSAL_SET
from themis_dagster.stats import Estimate, Resampling
from themis_dagster.stats.agreement import judge_agreement, majority_verdict
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import TaskParams
from themis_dagster.warehouse.read.judged import calibration_kappa, calibration_labels


def read_calibration(conn: Any, judge: str, calibration_set: str, labels: tuple[str, ...]) -> JudgeCalibration | None:
    """A judge's stored calibration on a set: its readable (human, judge) label pairs and kappa (None: none stored).

    ``labels``: the judge question's label set, which the calibration checked equals the set's.
    """
    rows = calibration_labels(conn, judge, calibration_set)
    if not rows:
        return None
    kappa = calibration_kappa(conn, judge, calibration_set)
    readable = [(row.human_label, row.judge_label) for row in rows if row.judge_label is not None]
    return JudgeCalibration(
        judge=judge,
        calibration_set=calibration_set,
        labels=labels,
        human=tuple(human for human, _ in readable),
        judged=tuple(said for _, said in readable),
        kappa=Estimate(kappa.value, kappa.ci_low, kappa.ci_high, kappa.n) if kappa is not None else None,
    )


def calibrations_for(warehouse: Warehouse, task: LoadedTask) -> dict[str, JudgeCalibration | None]:
    """Per question kind of the task's judge, the judge's stored calibration (None: not calibrated).

    Which set checks which kind: ``sets_checking``. With a panel's majority as the verdict
    (BOLD's ``judge_verdict: majority``), the majority's calibration (``majority_calibration``).
    """
    judge_model, judge = task.judge_model, task.calibrated_judge
    if judge_model is None or judge is None:
        return {}
    checking = sets_checking(task.name, judge)
    with warehouse.connect() as conn:
        if task.verdict_by_majority:
            return {
                kind: majority_calibration(conn, task.judges, name, judge_labels(judge, kind, name), task.params)
                for kind, name in sorted(checking.items())
            }
        return {
            kind: read_calibration(conn, judge_model, name, judge_labels(judge, kind, name))
            for kind, name in sorted(checking.items())
        }


def majority_name(judges: Sequence[str]) -> str:
    """How a panel's majority is named as a judge: ``majority of a, b, c``."""
    return "majority of " + ", ".join(judges)


def majority_calibration(
    conn: Any, judges: Sequence[str], calibration_set: str, labels: tuple[str, ...], params: TaskParams
) -> JudgeCalibration | None:
    """A panel's majority measured as a judge of its own on a calibration set every judge of it was calibrated on.

    Each calibration text's majority label is taken from the judges' stored labels by the rule the
    task uses (``stats.agreement.majority_verdict``: a tie or no readable vote is no verdict, left
    out as an unreadable answer is), and compared with the human label: its own confusion matrix and
    Cohen's kappa, with no engine asked. None when some judge of the panel has no stored calibration
    on the set (the majority is then an "uncalibrated judge").
    """
    votes: dict[str, list[str | None]] = {}
    human: dict[str, str] = {}
    for judge in judges:
        rows = calibration_labels(conn, judge, calibration_set)
        if not rows:
            return None
        for row in rows:
            human[row.item_id] = row.human_label
            votes.setdefault(row.item_id, []).append(row.judge_label)
    pairs = [
        (human[item_id], verdict)
        for item_id in sorted(votes)
        if len(votes[item_id]) == len(judges) and (verdict := majority_verdict(votes[item_id])) is not None
    ]
    kappa = None
    if pairs:
        resampling = Resampling(params.bootstrap_resamples, params.confidence, params.seed)
        kappa = judge_agreement([h for h, _ in pairs], [j for _, j in pairs], labels, resampling=resampling).kappa
    return JudgeCalibration(
        judge=majority_name(judges),
        calibration_set=calibration_set,
        labels=labels,
        human=tuple(h for h, _ in pairs),
        judged=tuple(j for _, j in pairs),
        kappa=kappa,
    )


def refusal_calibration(warehouse: Warehouse, judge: str) -> JudgeCalibration | None:
    """A task's refusal judge (``refusal_judge_model``) as stored on XSTest (None: not calibrated there)."""
    with warehouse.connect() as conn:
        return read_calibration(conn, judge, REFUSAL_SET, XSTEST_LABELS)


class Calibrations(Protocol):
    """What the metrics stage reads of judges' calibrations (``StoredCalibrations``: the warehouse's)."""

    def of_judge(self, task: LoadedTask) -> dict[str, JudgeCalibration | None]:
        """Per question kind of the task's calibrated judge, its calibration (``calibrations_for``)."""
        ...

    def of_refusal_judge(self, judge: str) -> JudgeCalibration | None:
        """The refusal judge's calibration on XSTest (``refusal_calibration``)."""
        ...


@dataclass(frozen=True)
class StoredCalibrations:
    """The calibrations the ``judge_calibration`` asset stored, read when the metrics stage asks."""

    warehouse: Warehouse

    def of_judge(self, task: LoadedTask) -> dict[str, JudgeCalibration | None]:
        return calibrations_for(self.warehouse, task)

    def of_refusal_judge(self, judge: str) -> JudgeCalibration | None:
        return refusal_calibration(self.warehouse, judge)
