"""How the explorer writes numbers: counts as integers, rates as percentages, marks as letters, nothing as "—".

Which metric is a rate or a count is the reports' definition (``reports/formatting.py``: ``*_rate``,
``*_share``, ``accuracy*``... but not a difference of two rates), so both say it alike.
Every value is text on screen so that a table never shows "None", "nan" or "240.000".
"""

from __future__ import annotations

import math

from themis_dagster.reports.formatting import is_count, is_rate
from themis_dagster.reports.summary import is_mark, mark_letter
from themis_dagster.warehouse.read.query import number

MISSING = "—"
__all__ = ["MISSING", "ci_text", "count", "ideal_text", "is_count", "is_rate", "percent", "plain", "text", "value_text"]


def plain(value: object, digits: int = 3) -> str:
    """A number with ``digits`` decimals (thousands separated; tiny values in scientific notation); "—" for none."""
    found = number(value)
    if found is None:
        return MISSING
    if math.isinf(found):
        return "∞" if found > 0 else "-∞"
    if abs(found) >= 1000:
        return f"{found:,.0f}"
    if found != 0 and abs(found) < 10 ** (-digits):
        return f"{found:.2e}"
    return f"{found:.{digits}f}"


def count(value: object) -> str:
    """An integer with thousands separated; "—" for none."""
    found = number(value)
    return MISSING if found is None else f"{round(found):,}"


def percent(value: object, digits: int = 1) -> str:
    """A share as a percentage ("55.3%"); "—" for none."""
    found = number(value)
    return MISSING if found is None else f"{100.0 * found:.{digits}f}%"


def value_text(metric: str, value: object) -> str:
    """A metric's value as it reads best: a mark's letter, a rate in percent, a count as an integer."""
    if is_mark(metric):
        letter = mark_letter(number(value))
        return f"{letter[0]} ({letter[1]})" if letter else MISSING
    if is_count(metric):
        return count(value)
    return percent(value) if is_rate(metric) else plain(value)


def ci_text(metric: str, low: object, high: object) -> str:
    """A CI in the metric's own unit ("52.1% – 58.9%"); "—" when either end is missing."""
    if number(low) is None or number(high) is None or is_mark(metric):
        return MISSING
    return f"{value_text(metric, low)} – {value_text(metric, high)}"


def ideal_text(metric: str, ideal: float | None) -> str:
    """The ideal in the metric's unit; a mark's ideal is A; none declared is "—"."""
    if is_mark(metric):
        return "A"
    return MISSING if ideal is None else value_text(metric, ideal)


def text(value: object) -> str:
    """Any cell as text: None and NaN as "—" (never "None" or "nan"), numbers as :func:`plain`, the rest as is."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return plain(value)
    return str(value)
