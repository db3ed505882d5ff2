"""The model against its parent and along its checkpoints, read from the comparison views.

``comparisons``, ``gate_verdicts`` and ``checkpoint_trends`` are built by the paired-comparison
assets (issue 15 items 2-4); a warehouse without them yet reads as "no comparison yet".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from themis_dagster.reports.formatting import MISSING, fmt, fmt_ci
from themis_dagster.reports.summary import drilldown_command
from themis_dagster.warehouse.read.comparisons import checkpoint_family, comparison_rows, trend_rows


@dataclass
class Lineage:
    """What the report shows about the model's parent and checkpoints (None: the view is absent)."""

    comparisons: list[dict[str, Any]] | None
    trends: list[dict[str, Any]] | None
    family: str | None = None
    baselines: list[str] = field(default_factory=list)


def _p(value: object) -> str:
    if not isinstance(value, int | float):
        return MISSING
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _comparison_rows(conn: duckdb.DuckDBPyConnection, model: str) -> list[dict[str, Any]] | None:
    rows = comparison_rows(conn, model, order="metric")
    if rows is None:
        return None
    shown = []
    for row in rows:
        significant = isinstance(row["p_adjusted"], int | float) and row["p_adjusted"] < 0.05
        if row["regressed"] is not None:
            text, tone = ("regressed (gate fails)", "bad") if row["regressed"] else ("within gate", "good")
        else:
            text, tone = ("significant change", "unsure") if significant else ("no significant change", "none")
        shown.append(
            {
                "baseline": row["baseline"],
                "task": row["task"],
                "metric": row["metric"] + (f" · {row['subset']}" if row["subset"] is not None else ""),
                "value": fmt(row["value"]),
                "baseline_value": fmt(row["baseline_value"]),
                "difference": fmt(row["difference"]),
                "ci": fmt_ci(row["ci_low"], row["ci_high"]),
                "p": _p(row["p_value"]),
                "p_adjusted": _p(row["p_adjusted"]),
                "n_pairs": f"{int(row['n_pairs']):,}" if row["n_pairs"] is not None else MISSING,
                "test": row["test"] or MISSING,
                "verdict": text,
                "tone": tone,
                "sql": drilldown_command(model, row["task"], row["metric"], row["subset"]),
            }
        )
    return shown


def _trend_rows(conn: duckdb.DuckDBPyConnection, model: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    """The headline trend of the model's checkpoint family (its own family's rows, by step)."""
    family = checkpoint_family(conn, model)
    if family is None:
        return None, None
    if not family:
        return None, []
    return family, trend_rows(conn, family)


def load_lineage(conn: duckdb.DuckDBPyConnection, model: str) -> Lineage:
    family, trends = _trend_rows(conn, model)
    comparisons = _comparison_rows(conn, model)
    baselines = sorted({row["baseline"] for row in comparisons or []})
    return Lineage(comparisons, trends, family, baselines)


def trend_table(rows: Sequence[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """Trend rows formatted; the report's own model highlighted, significant changes marked."""
    return [
        {
            "model": row["model"],
            "step": row["step"],
            "task": row["task"],
            "metric": row["metric"],
            "value": fmt(row["value"]),
            "ci": fmt_ci(row["ci_low"], row["ci_high"]),
            "change": fmt(row["change_vs_previous"]),
            "p_adjusted": _p(row["p_adjusted_vs_previous"]),
            "significant": bool(row["significant"]),
            "this": row["model"] == model,
        }
        for row in rows
    ]
