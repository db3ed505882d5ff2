"""The report's series figures: a metric across a model's checkpoints, across its materializations, and a
``checkpoint_trends`` family by training step; one panel per (task, metric), its CI a band.

Drawn in the report's style and palette (``plots.py``), returned as base64 PNG.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from themis_dagster.reports.data import MetricRow
from themis_dagster.reports.family import checkpoint_label, split_checkpoint
from themis_dagster.reports.plots import (
    BIASED,
    IDEAL,
    POINT,
    THIS,
    TITLE_CHARS,
    nan,
    panel_grid,
    png_base64,
    short,
    styled,
)

if TYPE_CHECKING:  # matplotlib is imported when a report is drawn, not with the definitions
    from matplotlib.axes import Axes

_Points = TypeVar("_Points")  # what one panel of a series plot draws: metric rows, or view rows


def _when(row: MetricRow) -> datetime:
    return row.materialized_at or datetime.min


def _latest(rows: Sequence[MetricRow]) -> dict[tuple[str, str, str], MetricRow]:
    """The most recent row per (model, task, metric)."""
    latest: dict[tuple[str, str, str], MetricRow] = {}
    for row in sorted(rows, key=_when):
        latest[(row.model, row.task, row.metric)] = row
    return latest


def _ideal_near(ax: Axes, ideal: float | None, rows: Sequence[MetricRow]) -> None:
    """The ideal as a dashed line when it lies near the data; else a note, so a trend is not squashed flat."""
    if ideal is None:
        return
    ends = [v for row in rows for v in (row.value, row.ci_low, row.ci_high) if v is not None]
    low, high = min(ends), max(ends)
    reach = max(high - low, 1e-9) * 1.5
    if low - reach <= ideal <= high + reach:
        ax.axhline(ideal, color=IDEAL, linestyle="--", linewidth=1.2, zorder=1)
        return
    where = "below" if ideal < low else "above"
    ax.text(
        0.99,
        0.02 if where == "below" else 0.96,
        f"ideal {ideal:.3g} ({where} the range shown)",
        transform=ax.transAxes,
        ha="right",
        va="bottom" if where == "below" else "top",
        fontsize=8,
        color=IDEAL,
    )


def _line(ax: Axes, xs: Sequence[float], rows: Sequence[MetricRow], color: str) -> None:
    """A line through the values with the CI as a band (gaps where a CI is missing)."""
    values = [nan(row.value) for row in rows]
    lows = [nan(row.ci_low) for row in rows]
    highs = [nan(row.ci_high) for row in rows]
    ax.fill_between(xs, lows, highs, color=color, alpha=0.18, linewidth=0)
    ax.plot(xs, values, "-o", color=color, markersize=4.5, linewidth=1.6)


def _series_figure(
    series: Sequence[tuple[tuple[str, str], _Points]], draw: Callable[[Axes, tuple[str, str], _Points], None]
) -> str | None:
    """One panel per (task, metric) series, in order, drawn by ``draw`` (None: no series).

    Why: the checkpoint, timeline and trend plots lay out, grid and title their panels alike.
    """
    if not series:
        return None
    fig, axes = panel_grid([4] * len(series), ncols=2)
    for ax, ((task, metric), points) in zip(axes, series, strict=True):
        draw(ax, (task, metric), points)
        ax.grid(axis="y")
        ax.set_title(short(f"{task} · {metric}", TITLE_CHARS), loc="left")
    return png_base64(fig)


@styled
def checkpoint_plot(
    model: str,
    family: Sequence[str],
    keys: Sequence[tuple[str, str]],
    rows: Sequence[MetricRow],
    ideals: Mapping[tuple[str, str], float],
) -> str | None:
    """Per (task, metric): the latest value of each checkpoint in family order, CI as a band."""
    latest = _latest(rows)
    steps = [split_checkpoint(member).step for member in family]
    position = {member: float(step) for member, step in zip(family, steps, strict=True) if step is not None}
    numeric = len(position) == len(family)
    if not numeric:  # not every member has a step: plot in family order
        position = {member: float(i) for i, member in enumerate(family)}
    series = []
    for task, metric in keys:
        points = [latest[(m, task, metric)] for m in family if (m, task, metric) in latest]
        points = [p for p in points if p.value is not None]
        if len(points) >= 2:
            series.append(((task, metric), points))

    def draw(ax: Axes, key: tuple[str, str], points: list[MetricRow]) -> None:
        xs = [position[p.model] for p in points]
        _line(ax, xs, points, POINT)
        mine = [p for p in points if p.model == model]
        if mine:
            ax.plot(
                [position[model]], [nan(mine[0].value)], "o", color=THIS, markersize=9, zorder=4, label=short(model)
            )
        _ideal_near(ax, ideals.get(key), points)
        if not numeric:
            ax.set_xticks(xs, [checkpoint_label(p.model) for p in points])
        ax.set_xlabel("checkpoint step")

    return _series_figure(series, draw)


@styled
def timeline_plot(
    model: str,
    keys: Sequence[tuple[str, str]],
    rows: Sequence[MetricRow],
    ideals: Mapping[tuple[str, str], float],
) -> str | None:
    """Per (task, metric) materialized more than once: each materialization in time order."""
    series = []
    for task, metric in keys:
        points = sorted(
            (r for r in rows if (r.model, r.task, r.metric) == (model, task, metric) and r.value is not None),
            key=_when,
        )
        if len(points) >= 2:
            series.append(((task, metric), points))

    def draw(ax: Axes, key: tuple[str, str], points: list[MetricRow]) -> None:
        xs = [float(i) for i in range(len(points))]
        _line(ax, xs, points, THIS)
        _ideal_near(ax, ideals.get(key), points)
        labels = [p.materialized_at.strftime("%m-%d\n%H:%M") if p.materialized_at else "?" for p in points]
        step = max(1, len(points) // 8)
        ax.set_xticks(xs[::step], labels[::step])
        ax.set_xlabel("materialization")

    return _series_figure(series, draw)


@styled
def trend_plot(rows: Sequence[Mapping[str, Any]], model: str, ideals: Mapping[tuple[str, str], float]) -> str | None:
    """Per (task, metric) of a ``checkpoint_trends`` family: value by step with its CI band.

    A step whose change from the previous one is significant (the view's ``significant``) is
    ringed in red; the report's own model is the large orange dot.
    """
    series: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("value") is not None and row.get("step") is not None:
            series.setdefault((str(row["task"]), str(row["metric"])), []).append(row)
    series = {key: sorted(points, key=lambda p: p["step"]) for key, points in series.items() if len(points) >= 2}

    def draw(ax: Axes, key: tuple[str, str], points: list[Mapping[str, Any]]) -> None:
        as_rows = [MetricRow(None, key[1], p["value"], p.get("ci_low"), p.get("ci_high"), 0,
                             model=str(p["model"]), task=key[0]) for p in points]  # fmt: skip
        xs = [float(p["step"]) for p in points]
        _line(ax, xs, as_rows, POINT)
        flagged = [(x, p["value"]) for x, p in zip(xs, points, strict=True) if p.get("significant")]
        if flagged:
            ax.plot([x for x, _ in flagged], [v for _, v in flagged], "o", markerfacecolor="none",
                    markeredgecolor=BIASED, markersize=12, markeredgewidth=2, zorder=5)  # fmt: skip
        mine = [(x, p["value"]) for x, p in zip(xs, points, strict=True) if p["model"] == model]
        if mine:
            ax.plot([mine[0][0]], [mine[0][1]], "o", color=THIS, markersize=9, zorder=4)
        _ideal_near(ax, ideals.get(key), as_rows)
        ax.set_xlabel("training step")

    return _series_figure([(key, series[key]) for key in sorted(series)], draw)
