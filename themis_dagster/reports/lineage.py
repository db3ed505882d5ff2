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
from themis_dagster.warehouse.reads import optional_rows


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
    rows = optional_rows(
        conn,
        "SELECT c.model, c.baseline, c.task, c.subset, c.metric, c.value, c.baseline_value, c.difference, c.ci_low, "
        "c.ci_high, c.p_value, c.p_adjusted, c.n_pairs, c.test FROM comparisons c WHERE c.model = ? "
        "ORDER BY c.baseline, c.task, c.metric, c.subset NULLS FIRST",
        [model],
    )
    if rows is None:
        return None
    gates = optional_rows(
        conn,
        "SELECT baseline, task, subset, metric, margin, alpha, regressed FROM gate_verdicts WHERE model = ?",
        [model],
    )
    gate = {(g["baseline"], g["task"], g["subset"], g["metric"]): g for g in gates or []}
    shown = []
    for row in rows:
        verdict = gate.get((row["baseline"], row["task"], row["subset"], row["metric"]))
        significant = isinstance(row["p_adjusted"], int | float) and row["p_adjusted"] < 0.05
        if verdict is not None:
            text, tone = ("regressed (gate fails)", "bad") if verdict["regressed"] else ("within gate", "good")
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
    families = optional_rows(conn, "SELECT DISTINCT family FROM checkpoint_trends WHERE model = ?", [model])
    if families is None:
        return None, None
    if not families:
        return None, []
    family = str(families[0]["family"])
    rows = optional_rows(
        conn,
        "SELECT model, step, task, metric, value, ci_low, ci_high, change_vs_previous, p_adjusted_vs_previous, "
        "significant FROM checkpoint_trends WHERE family = ? AND subset IS NULL ORDER BY task, metric, step",
        [family],
    )
    return family, rows or []


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
