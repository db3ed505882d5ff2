"""The figures a family declares for its results (``tasks/figures.py``), shaped from metric values and drawn for
the model report; the explorer's Figures page draws the same shapes with Altair.

A ``ranked`` figure is a metric's matching subsets sorted by value (the report draws them as its
subset panels are drawn); a ``shares`` figure is one stacked bar per panel and source (the model's
metric, and the ``beside`` reference's under it, paler), panels named ``<set>=<member>`` a set at a
time. A ``distribution`` figure is one item at a time, which only the explorer opens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from themis_dagster.reports import plots
from themis_dagster.reports.data import MetricRow, ReportData
from themis_dagster.tasks.family import figures_of
from themis_dagster.tasks.figures import RankedFigure, SharesFigure

CATEGORY_COLOURS = (plots.POINT, plots.THIS, plots.IDEAL, plots.BIASED, plots.OTHER, plots.TEXT_COLOURS[2])
REFERENCE_ALPHA = 0.45
BAR_INCH = 0.16


@dataclass(frozen=True)
class ShareBar:
    """One segment of a ``shares`` figure: a panel's (``group=member``) share of a category by one source."""

    panel: str
    group: str | None
    member: str
    category: str
    source: str
    value: float | None
    ci_low: float | None
    ci_high: float | None


def ranked_rows(rows: Sequence[MetricRow], figure: RankedFigure) -> list[MetricRow]:
    """The figure's subsets with a value, largest first (ties by name)."""
    kept = [r for r in rows if r.metric == figure.metric and figure.draws(r.subset) and r.value is not None]
    return sorted(kept, key=lambda r: (-(r.value or 0.0), r.subset or ""))


def share_bars(rows: Sequence[MetricRow], figure: SharesFigure) -> list[ShareBar]:
    """The figure's segments, the model's metric first, in the stored order of panels and categories; a subset that
    is not ``<panel>|<category>`` is no segment."""
    sources = [figure.metric] if figure.beside is None else [figure.metric, figure.beside]
    bars = []
    for source in sources:
        for row in rows:
            if row.metric != source or row.subset is None or "|" not in row.subset:
                continue
            panel, _, category = row.subset.rpartition("|")
            group, _, member = panel.partition("=") if "=" in panel else (None, "", panel)
            bars.append(ShareBar(panel, group, member, category, source, row.value, row.ci_low, row.ci_high))
    return bars


def share_groups(bars: Sequence[ShareBar]) -> list[str | None]:
    """The panel groups (persona sets) in their stored order; None: panels with no group."""
    return list(dict.fromkeys(bar.group for bar in bars))


def _distance(bars: Sequence[ShareBar], panel: str, sources: Sequence[str]) -> float:
    """Total-variation distance of a panel's model shares from its reference's (0 without a reference)."""
    if len(sources) < 2:
        return 0.0
    shares = [{b.category: b.value or 0.0 for b in bars if b.panel == panel and b.source == s} for s in sources[:2]]
    return 0.5 * sum(abs(shares[0].get(c, 0.0) - shares[1].get(c, 0.0)) for c in shares[0].keys() | shares[1].keys())


def capped_panels(bars: Sequence[ShareBar], cap: int) -> tuple[list[str], int]:
    """At most ``cap`` panels in their order: those farthest from their reference where there is one; and how many
    were left out."""
    panels = list(dict.fromkeys(bar.panel for bar in bars))
    sources = list(dict.fromkeys(bar.source for bar in bars))
    if len(panels) <= cap:
        return panels, 0
    kept = set(sorted(panels, key=lambda p: -_distance(bars, p, sources))[:cap])
    return [p for p in panels if p in kept], len(panels) - cap


@plots.styled
def shares_plot(bars: Sequence[ShareBar], panels: Sequence[str]) -> str | None:
    """Each panel's shares as stacked horizontal bars, the model's above the reference's (paler)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sources = list(dict.fromkeys(bar.source for bar in bars))
    categories = list(dict.fromkeys(bar.category for bar in bars))
    if not panels or not categories:
        return None
    step = len(sources) + 0.6
    fig = Figure(figsize=(7.5, 1.2 + BAR_INCH * step * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    share = {(b.panel, b.source, b.category): b.value or 0.0 for b in bars}
    for s, source in enumerate(sources):
        left = [0.0] * len(panels)
        ys = [p * step + s for p in range(len(panels))]
        for c, category in enumerate(categories):
            widths = [share.get((panel, source, category), 0.0) for panel in panels]
            colour = CATEGORY_COLOURS[c % len(CATEGORY_COLOURS)]
            alpha = 1.0 if s == 0 else REFERENCE_ALPHA
            ax.barh(ys, widths, left=left, height=0.9, color=colour, alpha=alpha, label=category if s == 0 else None)
            left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks([p * step + (len(sources) - 1) / 2 for p in range(len(panels))], [plots.short(p) for p in panels])
    ax.set_ylim(len(panels) * step - 0.4, -0.6)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel(" · ".join(f"{source}{' (paler)' if i else ''}" for i, source in enumerate(sources)))
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=min(len(categories), 4), frameon=False)
    return plots.png_base64(fig)


def _ranked(data: ReportData, task: str, figure: RankedFigure, cap: int) -> dict[str, Any] | None:
    rows = ranked_rows([r for r in data.subsets if r.task == task], figure)
    if not rows:
        return None
    panel = plots.cap_subsets(rows, data.ideals.get((task, figure.metric)), cap)
    note = f"{panel.hidden} more subsets in the table below" if panel.hidden else None
    return {"task": task, "title": figure.title, "img": plots.subset_plot([panel], task, data.ideals), "note": note}


def _shares(data: ReportData, task: str, figure: SharesFigure, cap: int) -> list[dict[str, Any]]:
    bars = share_bars([r for r in data.subsets if r.task == task], figure)
    sections = []
    for group in share_groups(bars):
        members = [bar for bar in bars if bar.group == group]
        panels, hidden = capped_panels(members, cap)
        title = figure.title + (f": {group}" if group else "")
        note = f"{hidden} more (the farthest from their reference shown); all in the explorer" if hidden else None
        sections.append({"task": task, "title": title, "img": shares_plot(members, panels), "note": note})
    return sections


def figure_sections(data: ReportData, cap: int) -> list[dict[str, Any]]:
    """The declared figures of the report's tasks that have values: task, title, image, and a note of what is left
    out (at most ``cap`` rows or panels a figure)."""
    sections: list[dict[str, Any]] = []
    for task in sorted({row.task for row in data.subsets}):
        for figure in figures_of(task):
            if isinstance(figure, RankedFigure):
                found = _ranked(data, task, figure, cap)
                sections += [found] if found else []
            elif isinstance(figure, SharesFigure):
                sections += _shares(data, task, figure, cap)
    return [section for section in sections if section["img"]]
