"""Pass rates and tolerance verdicts of LangBiTe's global evaluation, as metric rows.

Source: github SOM-Research/LangBiTe, ``langbite/controllers/global_evaluation.py``::

    passedpct = passednr / total          # total = passednr + failednr (errors left out)
    def __evaluate(tolerance, passednr, failednr):
        if (passednr + failednr) == 0: return 'Not evaluated'
        if tolerance <= passednr / (passednr + failednr): return 'Passed'
        return 'Failed'

LangBiTe groups template evaluations by (provider, model, concern, language, input type, reflection
type) and takes the tolerance of the *last* requirement declaring the concern (``{req.concern:
req.tolerance}``). Here the model is the partition; the same rule gives the per-slice verdicts, and
each requirement also gets its own verdict against its own tolerance. Where nothing was evaluated the
pass rate and verdict are NULL (LangBiTe's report prints a pass percentage of 0 there).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from themis_dagster.tasks.langbite.scenario import TestScenario
from themis_dagster.tasks.scoring import estimate_row
from themis_dagster.tasks.spec import Judgment, MetricValue, TaskParams

Verdict = Literal["Passed", "Failed", "Not evaluated"]
VERDICT_VALUE: dict[str, float | None] = {"Passed": 1.0, "Failed": 0.0, "Not evaluated": None}


@dataclass
class Counts:
    """Template evaluations of one group: LangBiTe's Passed Nr, Failed Nr and Error Nr."""

    passed: int = 0
    failed: int = 0
    error: int = 0

    def add(self, evaluation: str) -> None:
        if evaluation == "Passed":
            self.passed += 1
        elif evaluation == "Failed":
            self.failed += 1
        else:
            self.error += 1

    @property
    def total(self) -> int:
        """LangBiTe's Total: passed + failed (errors are not counted)."""
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.total if self.total else None


def tolerance_verdict(tolerance: float, passed: int, failed: int) -> Verdict:
    """LangBiTe ``GlobalEvaluator.__evaluate``: Passed when ``tolerance <= passed / (passed + failed)``."""
    if passed + failed == 0:
        return "Not evaluated"
    return "Passed" if tolerance <= passed / (passed + failed) else "Failed"


def slice_key(concern: Any, language: Any, input_type: Any, reflection: Any) -> str:
    return f"concern={concern}|language={language}|input={input_type}|reflection={reflection}"


def requirement_key(name: Any) -> str:
    return f"requirement={name}"


def evaluation_of(judgment: Judgment) -> str:
    return str(judgment.detail.get("evaluation", "Error"))


def slice_of(judgment: Judgment) -> str:
    d = judgment.detail
    return slice_key(d.get("concern"), d.get("language"), d.get("input_type"), d.get("reflection_type"))


def group_counts(judgments: Iterable[Judgment]) -> dict[str | None, Counts]:
    """Counts overall (None), per requirement and per slice."""
    groups: dict[str | None, Counts] = defaultdict(Counts)
    for judgment in judgments:
        evaluation = evaluation_of(judgment)
        for key in (None, requirement_key(judgment.detail.get("requirement")), slice_of(judgment)):
            groups[key].add(evaluation)
    return groups


def _scores(judgments: list[Judgment], key: str | None) -> tuple[list[float], list[float]]:
    """(pass scores of Passed/Failed templates, error indicators of all templates) in group ``key``."""
    passes, errors = [], []
    for judgment in judgments:
        if key is not None and key not in (requirement_key(judgment.detail.get("requirement")), slice_of(judgment)):
            continue
        evaluation = evaluation_of(judgment)
        errors.append(1.0 if evaluation not in ("Passed", "Failed") else 0.0)
        if evaluation in ("Passed", "Failed"):
            passes.append(1.0 if evaluation == "Passed" else 0.0)
    return passes, errors


def _estimate(metric: str, subset: str | None, values: list[float], params: TaskParams) -> MetricValue:
    return estimate_row(subset, metric, values, params)


def metric_rows(judgments: list[Judgment], scenario: TestScenario, params: TaskParams) -> list[MetricValue]:
    """pass_rate and error_rate (overall, per requirement, per slice) and verdict (per requirement, per slice).

    pass_rate = passed / (passed + failed) with a seeded bootstrap CI over templates; error_rate = errors /
    all templates; verdict = 1 Passed, 0 Failed, NULL Not evaluated (n = passed + failed).
    """
    counts = group_counts(judgments)
    requirement_keys = [requirement_key(r.name) for r in scenario.requirements]
    slice_keys = sorted(key for key in counts if key is not None and key.startswith("concern="))
    keys: list[str | None] = [None, *requirement_keys, *slice_keys]
    rows: list[MetricValue] = []
    for key in keys:
        passes, errors = _scores(judgments, key)
        rows.append(_estimate("pass_rate", key, passes, params))
        rows.append(_estimate("error_rate", key, errors, params))
    concern_tolerance = scenario.concern_tolerances()
    for requirement in scenario.requirements:
        group = counts.get(requirement_key(requirement.name), Counts())
        verdict = tolerance_verdict(requirement.tolerance, group.passed, group.failed)
        rows.append(
            MetricValue(requirement_key(requirement.name), "verdict", VERDICT_VALUE[verdict], None, None, group.total)
        )
    for key in slice_keys:
        concern = key.split("|", 1)[0].removeprefix("concern=")
        tolerance = concern_tolerance.get(concern)
        group = counts[key]
        value = None if tolerance is None else VERDICT_VALUE[tolerance_verdict(tolerance, group.passed, group.failed)]
        rows.append(MetricValue(key, "verdict", value, None, None, group.total))
    return rows
