"""Which judge question each calibration set checks, and what a task's judge offers to be checked.

A calibration set (``judging/calibration_sets.py``) holds human labels of one kind (regard);
it checks the judge question that gives labels of that kind (BOLD's regard question). The judge
is asked through its task's own ``SecondOpinion`` (the same template, sampling settings and
answer reading as in the task), so what is measured is the judge as the task uses it.

``CALIBRATED_QUESTIONS`` names, per calibration set, the task and question kind; it is the
calibration asset's static partition dimension. XSTest's replies and a user's CSV join when a
task's judge gives their labels (no refusal judge asks yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from themis_dagster.errors import ConfigError
from themis_dagster.judging.calibration_sets import CalibrationRow, CalibrationSet, load_regard
from themis_dagster.judging.correction import JudgeCalibration, JudgedValue
from themis_dagster.settings import Settings
from themis_dagster.tasks.spec import Judgment, MetricValue, Request


class JudgeQuestion(NamedTuple):
    """The question a calibration set checks: task ``task``'s judge asked question ``kind``."""

    task: str
    kind: str


CALIBRATED_QUESTIONS: dict[str, JudgeQuestion] = {"regard": JudgeQuestion("bold", "regard")}


@runtime_checkable
class CalibratedJudge(Protocol):
    """A ``SecondOpinion`` whose labels can be checked against people and its metrics corrected.

    ``calibration_sets`` maps each question kind it asks to the calibration set that checks it
    (a kind without one is reported as judged by an "uncalibrated judge").
    """

    calibration_sets: Mapping[str, str]

    def labels(self, kind: str) -> tuple[str, ...]:
        """Every label the judge's question ``kind`` can give."""
        ...

    def calibration_requests(self, kind: str, rows: Sequence[CalibrationRow], params: Any) -> list[Request]:
        """Question ``kind`` about each calibration row, as the task asks it (request ids ``<item_id>:<kind>``)."""
        ...

    def read_label(self, kind: str, reply: str | None) -> str | None:
        """The label a reply gives (None: unreadable), as the task reads it."""
        ...

    def judged_values(
        self,
        judgments: list[Judgment],
        values: list[MetricValue],
        params: Any,
        calibrations: Mapping[str, JudgeCalibration | None],
    ) -> list[JudgedValue]:
        """Every judged metric of ``values`` as judged and corrected with ``calibrations`` (by kind)."""
        ...


def calibration_set_names() -> tuple[str, ...]:
    """The calibration sets a judge can be calibrated on (the calibration asset's partitions)."""
    return tuple(CALIBRATED_QUESTIONS)


def load_calibration_set(
    name: str, *, datasets_dir: Path, cache_dir: Path, allow_download: bool = False
) -> CalibrationSet:
    """The named calibration set, read and validated (regard: Sheng et al.'s three splits, 301 texts)."""
    if name == "regard":
        settings = Settings(datasets_dir=datasets_dir, cache_dir=cache_dir)
        return load_regard(settings=settings, allow_download=allow_download)
    raise ConfigError(f"calibration_set: {name!r} is not declared; known: {', '.join(calibration_set_names())}")


def check_judge_labels(judge: CalibratedJudge, kind: str, calibration: CalibrationSet) -> None:
    """A calibration set whose labels are not exactly the judge's fails naming the field (not a silent mismatch)."""
    given, declared = set(judge.labels(kind)), set(calibration.labels)
    if given != declared:
        raise ConfigError(
            f"calibration set {calibration.name!r}: field 'labels' is {sorted(declared)}, but the judge's "
            f"{kind!r} question answers {sorted(given)}"
        )
