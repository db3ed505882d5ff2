"""The report's figures: dot-and-whisker panels here, values across checkpoints and time in ``series_plots.py``;
each returned as a base64 PNG drawn in the one style (``styled``) and palette written here.

Each PNG is reduced to a fixed palette before it is inlined: the report's own colours exactly, and
their blends with white for anti-aliased edges and bands (:func:`palette`). The figures are flat
colours, so this loses nothing a reader sees and makes each file about a third of the size, which
keeps one model's report a shareable single file (docs/reports.md).
Uses matplotlib's object API (``Figure`` without pyplot), so no global figure state is kept
and any thread may draw. Math text is off: a ``$`` in a task or model name stays a ``$``.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, wraps
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from themis_dagster.reports.data import MetricRow

if TYPE_CHECKING:  # matplotlib is imported when a report is drawn, not with the definitions (0.2 s)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

POINT = "#1f4e79"  # a value whose interval contains the ideal (or has no ideal / no interval)
BIASED = "#c0392b"  # a value whose interval excludes the ideal
OTHER = "#9aa5b1"  # other models
THIS = "#e67e22"  # the report's model
IDEAL = "#2e7d32"
LABEL_CHARS = 34
TITLE_CHARS = 48  # two panels side by side: longer titles would run into each other
DPI = 90  # with 9-point text: 11-pixel labels, legible on any screen
TEXT_COLOURS = ("#000000", "#333333", "#5f6b7a", "#e3e6ea")  # labels, annotations, notes, grid
BLEND_STEPS = 12  # shades between each colour and white: smooth enough for anti-aliased edges

STYLE: dict[str, Any] = {
    "text.parse_math": False,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "x",
    "grid.color": "#e3e6ea",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
}

P = ParamSpec("P")
R = TypeVar("R")


def nan(value: float | None) -> float:
    """Matplotlib's missing value: NaN leaves a gap where None would fail."""
    return float("nan") if value is None else value


def styled(draw: Callable[P, R]) -> Callable[P, R]:
    """Draw (and save) under the report's style without touching the caller's rcParams."""

    @wraps(draw)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        import matplotlib as mpl

        with mpl.rc_context(STYLE):  # type: ignore[arg-type]
            return draw(*args, **kwargs)

    return wrapper


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """A label that fits beside an axis: one line, at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def excludes(row: MetricRow, ideal: float | None) -> bool:
    """Whether the row's interval lies wholly on one side of the ideal (evidence of bias)."""
    if ideal is None or row.ci_low is None or row.ci_high is None:
        return False
    return ideal < row.ci_low or ideal > row.ci_high


@cache
def palette() -> tuple[tuple[int, int, int], ...]:
    """Every colour the figures use, and each blended with white in even steps (white first)."""
    from matplotlib.colors import to_rgb

    colours: list[tuple[int, int, int]] = [(255, 255, 255)]
    for name in (POINT, BIASED, OTHER, THIS, IDEAL, *TEXT_COLOURS):
        rgb = to_rgb(name)
        for step in range(BLEND_STEPS):
            mix = step / BLEND_STEPS  # 0: the colour itself
            r, g, b = (round(255 * (c + (1.0 - c) * mix)) for c in rgb)
            if (r, g, b) not in colours:
                colours.append((r, g, b))
    return tuple(colours)


def _on_palette(image: Any) -> Any:
    """``image`` with each pixel the nearest :func:`palette` colour, exactly (a report colour stays itself).

    Why not PIL's ``quantize(palette=...)``: its nearest-colour lookup is approximate, and white
    came out as (253, 253, 253). A figure has a few thousand distinct colours, so each is matched once.
    """
    import numpy as np
    from PIL import Image

    rgb = np.asarray(image.convert("RGB"), dtype=np.int32)
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    distinct, where = np.unique(packed.ravel(), return_inverse=True)
    distinct_rgb = np.stack([(distinct >> 16) & 255, (distinct >> 8) & 255, distinct & 255], axis=1)
    colours = np.array(palette(), dtype=np.int32)
    nearest = ((distinct_rgb[:, None, :] - colours[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
    height, width = packed.shape
    indexed = Image.frombytes("P", (width, height), nearest[where].astype(np.uint8).tobytes())
    indexed.putpalette(colours.astype(np.uint8).ravel().tolist())
    return indexed


def png_base64(fig: Figure) -> str:
    """The figure as a palette PNG (:func:`palette`), base64 (for a ``data:`` URI)."""
    from PIL import Image

    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=DPI, facecolor="white")  # constrained layout: no tight bbox pass
    drawn.seek(0)
    with Image.open(drawn) as image:
        small = _on_palette(image)
    packed = io.BytesIO()
    small.save(packed, format="PNG", optimize=True)
    return base64.b64encode(packed.getvalue()).decode("ascii")


def panel_grid(
    heights: Sequence[int], ncols: int, column_width: float = 5.0, row_inch: float = 0.3
) -> tuple[Figure, list[Axes]]:
    """A grid of panels, ``heights[i]`` rows tall each; a short panel beside a tall one keeps its own height.

    Each column is ``column_width`` inches: a lone panel is not stretched to the page's width.
    """
    ncols = max(1, min(ncols, len(heights)))
    width = column_width * ncols
    nrows = -(-len(heights) // ncols)
    ratios = [max(heights[r * ncols : (r + 1) * ncols]) for r in range(nrows)]
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, sum(row_inch * h + 1.0 for h in ratios)), layout="constrained")
    FigureCanvasAgg(fig)  # the Agg (raster) backend, whatever backend pyplot elsewhere uses
    outer = fig.add_gridspec(nrows, ncols, height_ratios=[h + 3.0 for h in ratios])
    axes = []
    for i, height in enumerate(heights):
        row, col = divmod(i, ncols)
        cell = outer[row, col]
        if height < ratios[row]:
            cell = cell.subgridspec(2, 1, height_ratios=[height + 3.0, ratios[row] - height])[0]
        axes.append(fig.add_subplot(cell))
    return fig, axes


def _ideal_marks(ax: Axes, ideals: Sequence[float | None], vertical: bool = True) -> None:
    """One reference line when every row shares the ideal, else a short tick per row."""
    known = {ideal for ideal in ideals if ideal is not None}
    if not known:
        return
    if len(known) == 1:
        shared = known.pop()
        if vertical:
            ax.axvline(shared, color=IDEAL, linestyle="--", linewidth=1.2, zorder=1)
        else:
            ax.axhline(shared, color=IDEAL, linestyle="--", linewidth=1.2, zorder=1)
        return
    for y, ideal in enumerate(ideals):
        if ideal is not None:
            ax.plot([ideal, ideal], [y - 0.4, y + 0.4], color=IDEAL, linestyle="--", linewidth=1.2, zorder=1)


@dataclass(frozen=True)
class Dot:
    """One row of a dot-and-whisker panel."""

    label: str
    row: MetricRow
    ideal: float | None
    color: str
    bold: bool = False


def _forest(ax: Axes, dots: Sequence[Dot], annotate: bool = False) -> None:
    """Horizontal dot-and-whisker rows, top to bottom in the order given; no whisker without a CI.

    Whiskers, caps and dots are one collection each, so a panel of many rows stays quick to draw.
    """
    ys = list(range(len(dots)))
    whiskers = [(y, d) for y, d in zip(ys, dots, strict=True) if d.row.ci_low is not None and d.row.ci_high is not None]
    if whiskers:
        rows = [d.row for _, d in whiskers]
        colors = [d.color for _, d in whiskers]
        ax.hlines(
            [y for y, _ in whiskers],
            [nan(r.ci_low) for r in rows],
            [nan(r.ci_high) for r in rows],
            colors=colors,
            lw=2.0,
        )
        cap_x = [nan(end) for r in rows for end in (r.ci_low, r.ci_high)]
        cap_y = [y for y, _ in whiskers for _ in range(2)]
        cap_colors = [color for color in colors for _ in range(2)]
        ax.vlines(cap_x, [y - 0.15 for y in cap_y], [y + 0.15 for y in cap_y], colors=cap_colors, linewidth=1.2)
    points = [(y, d) for y, d in zip(ys, dots, strict=True) if d.row.value is not None]
    if points:
        ax.scatter(
            [nan(d.row.value) for _, d in points],
            [y for y, _ in points],
            c=[d.color for _, d in points],
            s=[50 if d.bold else 30 for _, d in points],
            zorder=3,
        )
    if annotate:
        for y, dot in points:
            ax.annotate(
                _interval_text(dot.row),
                (nan(dot.row.value), y),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color="#333333",
            )
    _ideal_marks(ax, [dot.ideal for dot in dots])
    ax.set_yticks(ys, [short(dot.label) for dot in dots])
    for tick, dot in zip(ax.get_yticklabels(), dots, strict=True):
        if dot.bold:
            tick.set_fontweight("bold")
            tick.set_color(THIS)
    ax.set_ylim(len(dots) - 0.5, -0.5 - (0.3 if annotate else 0.0))
    ax.margins(x=0.08)


def _interval_text(row: MetricRow) -> str:
    if row.value is None:
        return ""
    if row.ci_low is None or row.ci_high is None:
        return f"{row.value:.3g}"
    return f"{row.value:.3g} [{row.ci_low:.3g}, {row.ci_high:.3g}]"


@styled
def headline_plot(rows: Sequence[MetricRow], ideals: Mapping[tuple[str, str], float]) -> str | None:
    """One panel per metric, a row per task: value with CI, the ideal as a dashed line."""
    metrics: dict[str, list[MetricRow]] = {}
    for row in rows:
        if row.value is not None:
            metrics.setdefault(row.metric, []).append(row)
    if not metrics:
        return None
    names = sorted(metrics)
    fig, axes = panel_grid([len(metrics[name]) for name in names], ncols=2, row_inch=0.45)
    for ax, name in zip(axes, names, strict=True):
        dots = []
        for row in sorted(metrics[name], key=lambda r: r.task):
            ideal = ideals.get((row.task, row.metric))
            dots.append(Dot(row.task, row, ideal, BIASED if excludes(row, ideal) else POINT))
        _forest(ax, dots, annotate=True)
        ax.set_title(short(name, TITLE_CHARS), loc="left")
    return png_base64(fig)


@dataclass(frozen=True)
class SubsetPanel:
    metric: str
    shown: list[MetricRow]
    hidden: int


def cap_subsets(rows: Sequence[MetricRow], ideal: float | None, cap: int) -> SubsetPanel:
    """At most ``cap`` subsets: the ones farthest from the ideal (or largest), sorted by value."""
    valued = [row for row in rows if row.value is not None]
    values = {id(row): float(row.value) for row in valued if row.value is not None}
    center = ideal if ideal is not None else min(values.values(), default=0.0)
    kept = sorted(valued, key=lambda r: (-abs(values[id(r)] - center), r.subset or ""))[:cap]
    kept.sort(key=lambda r: (-(r.value or 0.0), r.subset or ""))
    return SubsetPanel(rows[0].metric if rows else "", kept, len(valued) - len(kept))


@styled
def subset_plot(panels: Sequence[SubsetPanel], task: str, ideals: Mapping[tuple[str, str], float]) -> str | None:
    """One panel per metric of a task, a row per subset sorted by value (largest on top)."""
    panels = [panel for panel in panels if panel.shown]
    if not panels:
        return None
    fig, axes = panel_grid([len(panel.shown) for panel in panels], ncols=2, row_inch=0.24)
    for ax, panel in zip(axes, panels, strict=True):
        ideal = ideals.get((task, panel.metric))
        dots = [Dot(row.subset or "", row, ideal, BIASED if excludes(row, ideal) else POINT) for row in panel.shown]
        _forest(ax, dots)
        ax.set_title(short(panel.metric, TITLE_CHARS), loc="left")
        if panel.hidden:
            ax.set_xlabel(f"{len(panel.shown)} shown (farthest from the ideal), {panel.hidden} more", color="#5f6b7a")
    return png_base64(fig)


@styled
def comparison_plot(
    model: str,
    keys: Sequence[tuple[str, str]],
    all_headline: Sequence[MetricRow],
    ideals: Mapping[tuple[str, str], float],
    cap: int = 25,
) -> str | None:
    """Per (task, metric): every model's headline value sorted, this model highlighted.

    With more than ``cap`` models the panel shows the ``cap`` nearest this model in the order.
    """
    groups = []
    for key in keys:
        peers = sorted(
            (row for row in all_headline if (row.task, row.metric) == key and row.value is not None),
            key=lambda r: (-(r.value or 0.0), r.model),
        )
        if not peers:
            continue
        at = next((i for i, row in enumerate(peers) if row.model == model), 0)
        start = max(0, min(at - cap // 2, len(peers) - cap))
        groups.append((key, peers[start : start + cap], len(peers)))
    if not groups or all(total < 2 for _, _, total in groups):
        return None
    fig, axes = panel_grid([len(shown) for _, shown, _ in groups], ncols=2, row_inch=0.26)
    for ax, ((task, metric), shown, total) in zip(axes, groups, strict=True):
        ideal = ideals.get((task, metric))
        dots = [
            Dot(row.model, row, ideal, THIS if row.model == model else OTHER, bold=row.model == model) for row in shown
        ]
        _forest(ax, dots)
        more = f"{len(shown)} of {total} models shown (those nearest {short(model, 24)})" if total > len(shown) else ""
        ax.set_title(short(f"{task} · {metric}", TITLE_CHARS), loc="left")
        if more:
            ax.set_xlabel(more, color="#5f6b7a")
    return png_base64(fig)
