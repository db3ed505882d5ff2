"""How numbers and strings appear in the report and its Markdown summary."""

from __future__ import annotations

import html
import math
import re

MISSING = "—"
# a metric that is a share of items (a percentage in the explorer), not a difference of two shares
_RATE = re.compile(
    r"(^|_)(rate|share|ratio)(_[a-z0-9]+)?$|^(acc|accuracy|pct|frequency)(_|$)|_(accuracy|tpr|tnr)$|_rate_"
)
_DIFFERENCE = re.compile(r"(^|_)(diff|gap|disparity|difference)(_|$)")
_COUNT = re.compile(r"^n$|^n_|_count$|^count_|_departures$")


def is_rate(metric: str) -> bool:
    """Whether the metric is a share of items (``*_rate``, ``*_share``, ``accuracy*``, ``pct_*``...), not a
    difference of two shares (``diff_*``, ``*_gap``, ``*_disparity``)."""
    return bool(_RATE.search(metric)) and not _DIFFERENCE.search(metric)


def is_count(metric: str) -> bool:
    """Whether the metric counts items (``n_answered``): written as an integer, never "240.000"."""
    return bool(_COUNT.search(metric))


def fmt_count(value: float | None) -> str:
    """An integer with thousands separated; ``—`` for none."""
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return MISSING
    return f"{round(value):,}"


def fmt(value: float | None) -> str:
    """Three decimals for the usual metric range; scientific for tiny values; ``—`` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 0.001 or value == 0:
        return f"{value:.3f}"
    return f"{value:.2e}"


def fmt_ci(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return MISSING
    return f"{fmt(low)} – {fmt(high)}"


def fmt_share(part: int, whole: int) -> str:
    return MISSING if whole <= 0 else f"{100.0 * part / whole:.1f}%"


def md(text: object) -> str:
    """A name safe in Markdown prose or a table cell: one line, no raw HTML, no code/emphasis/link/pipe syntax.

    ``_`` is left alone: between letters (``pct_stereotype``) CommonMark never reads it as emphasis.
    """
    flat = html.escape(" ".join(str(text).split()), quote=False)
    for char in "\\`*[]|":
        flat = flat.replace(char, "\\" + char)
    return flat


def clip(text: object, limit: int = 200) -> str:
    flat = " ".join(str(text).split()) if text is not None else ""
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
