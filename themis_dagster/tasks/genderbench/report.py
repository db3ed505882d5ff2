"""GenderBench's multi-model HTML report, built from the warehouse (``create_html_visualization``'s content).

GenderBench 0.5.0 (``report_generation/report.py``) renders, over the harness logs of several
models: the global table (one A-D mark per model and section: decision making, creative writing,
manifested opinions, affective computing), one chart per (probe, metric) of each section showing
every model's confidence interval over the metric's A-D ranges, and the masculine-vs-feminine
("mvf") charts. Its Jinja/Chart.js templates are not in the wheel, so the layout here is our own:
the same table and charts as inline SVG (no script, no network). A section mark is shown only for a
complete section (``marks.aggregate_use_cases``); an incomplete one names its missing probes. A
model whose runs departed from GenderBench's settings (``core.settings_departures``) is flagged
with the departures, since its marks are then not GenderBench's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from themis_dagster.errors import ConfigError
from themis_dagster.tasks.genderbench.core import DEPARTURE_METRIC
from themis_dagster.tasks.genderbench.marks import MARK_LETTERS, MVF, SECTIONS, mark_letter
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import MarkScale

TEMPLATE_DIR = Path(__file__).parent  # genderbench_report.html.jinja, beside this module
SECTION_TITLES = {
    "decision_making": "Decision-making",
    "creative_writing": "Creative writing",
    "manifested_opinions": "Manifested opinions",
    "affective_computing": "Affective computing",
}
MARK_COLOURS = {"A": "#b7e1a1", "B": "#f3e79b", "C": "#f6b26b", "D": "#e06666"}
WIDTH, ROW, LEFT = 640, 22, 190  # chart geometry (px)


@dataclass
class Chart:
    task: str
    metric: str
    bands: list[tuple[float, float, str]]  # x0, width, letter
    rows: list[dict[str, Any]] = field(default_factory=list)
    axis: list[tuple[float, str]] = field(default_factory=list)
    zero: float | None = None

    @property
    def height(self) -> int:
        return 30 + ROW * max(1, len(self.rows))


def probe_marks(task: str) -> dict[str, MarkScale]:
    """The mark definitions a probe declares (its ``marks`` hook), by metric; none for a task not declared here."""
    try:
        hooks = load_task(task).hooks
    except ConfigError:
        return {}
    return {definition.metric: definition for definition in hooks.marks}


def _x(value: float, low: float, high: float) -> float:
    value = min(max(value, low), high)
    return LEFT + (value - low) / (high - low) * (WIDTH - LEFT - 20)


def chart(
    task: str, metric: str, models: Sequence[str], values: Mapping[tuple[str, str, str], dict[str, Any]]
) -> Chart:
    """One metric's chart: the A-D bands of its range and each model's CI and point."""
    definition = probe_marks(task).get(metric)
    low, high = definition.overall_range if definition else (-1.0, 1.0)
    bands = []
    if definition is not None:
        for mark, ranges in enumerate(definition.ranges):
            for lo, hi in ranges:
                bands.append((_x(lo, low, high), _x(hi, low, high) - _x(lo, low, high), MARK_LETTERS[mark]))
    result = Chart(task, metric, bands)
    result.axis = [(_x(tick, low, high), f"{tick:g}") for tick in (low, (low + high) / 2, high)]
    if low < 0 < high:
        result.zero = _x(0.0, low, high)
    for index, model in enumerate(models):
        row = values.get((model, task, metric))
        y = 20 + ROW * index
        entry: dict[str, Any] = {"model": model, "y": y, "text": "not run"}
        if row is not None and row.get("value") is not None:
            point = float(row["value"])
            ci_low = row.get("ci_low")
            ci_high = row.get("ci_high")
            entry |= {"point": _x(point, low, high), "text": f"{point:.3f}"}
            if ci_low is not None and ci_high is not None:
                entry |= {"x0": _x(float(ci_low), low, high), "x1": _x(float(ci_high), low, high)}
                entry["text"] += f" [{float(ci_low):.3f}, {float(ci_high):.3f}]"
            mark_row = values.get((model, task, f"{metric}_mark"))
            letter = mark_letter(mark_row.get("value")) if mark_row else None
            entry["text"] += f" {letter}" if letter else ""
        result.rows.append(entry)
    return result


def build_report(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The report's content from ``metric_values`` rows (model, task, subset, metric, value, ci_low, ci_high)."""
    values: dict[tuple[str, str, str], dict[str, Any]] = {}
    sections: dict[str, dict[str, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
    departures: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    models: set[str] = set()
    for row in rows:
        model, task, subset, metric = str(row["model"]), str(row["task"]), row.get("subset"), str(row["metric"])
        if task == "genderbench" and subset and str(subset).startswith("use_case="):
            section = str(subset).removeprefix("use_case=")
            sections[model][section][metric] = row.get("value")
            models.add(model)
        elif task.startswith("gb_"):
            models.add(model)
            if metric == DEPARTURE_METRIC and subset:
                departures[model][task].append(str(subset))
            elif subset is None:
                values[(model, task, metric)] = dict(row)
    ordered = sorted(models)
    table = []
    for model in ordered:
        cells = []
        for section in SECTIONS:
            stats = sections[model].get(section, {})
            missing = sorted(name.removeprefix("missing:") for name in stats if name.startswith("missing:"))
            letter = mark_letter(stats.get("mark"))
            if not stats:
                cells.append({"letter": None, "note": "no probe run"})
            elif missing or letter is None:
                cells.append(
                    {"letter": None, "note": "incomplete: missing " + ", ".join(missing) if missing else "no mark"}
                )
            else:
                cells.append({"letter": letter, "note": ""})
        table.append({"model": model, "cells": cells, "departures": dict(departures.get(model, {}))})
    charts = {
        section: [chart(task, metric, ordered, values) for task, metric in pairs] for section, pairs in SECTIONS.items()
    }
    charts["mvf"] = [chart(task, metric, ordered, values) for task, metric in MVF]
    return {"models": ordered, "table": table, "charts": charts}


def render_report(content: Mapping[str, Any], generated_at: str) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=True, undefined=jinja2.StrictUndefined
    )
    template = env.get_template("genderbench_report.html.jinja")
    return template.render(
        **content,
        titles={**SECTION_TITLES, "mvf": "Masculine vs. feminine"},
        colours=MARK_COLOURS,
        width=WIDTH,
        left=LEFT,
        generated_at=generated_at,
    )
