"""The multi-model leaderboard page: every registered model, per benchmark family, side by side.

Reads ``metric_values`` (headline rows) and the ``leaderboard`` table's ranks through a
read-only connection; models registered but not evaluated yet are listed as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from themis_dagster import __version__
from themis_dagster.reports.data import JudgedRow, MetricRow, _metric_rows, _rows, judged_rows
from themis_dagster.reports.formatting import MISSING
from themis_dagster.reports.judged_text import corrected_text, judge_text
from themis_dagster.reports.model_report import _environment, report_dirname
from themis_dagster.reports.summary import FAMILIES, benchmark_family, summary_row


@dataclass(frozen=True)
class RegisteredModel:
    """What the registry says of a model: its id, parent and mitigation (a short text)."""

    id: str
    parent: str | None = None
    mitigation: str | None = None
    registered: bool = True


@dataclass(frozen=True)
class LeaderboardPage:
    html: str
    models: tuple[str, ...]
    columns: int


def _ranks(conn: duckdb.DuckDBPyConnection) -> dict[tuple[str, str, str], tuple[int, int]]:
    rows = _rows(
        conn, "SELECT model, task, metric, rank, count(*) OVER (PARTITION BY task, metric) AS of FROM leaderboard"
    )
    return {(str(r["model"]), str(r["task"]), str(r["metric"])): (int(r["rank"]), int(r["of"])) for r in rows}


def _ideals(
    conn: duckdb.DuckDBPyConnection, given: Mapping[tuple[str, str], float] | None
) -> dict[tuple[str, str], float]:
    rows = _rows(conn, "SELECT DISTINCT task, metric, ideal FROM leaderboard WHERE ideal IS NOT NULL")
    ideals = {(str(r["task"]), str(r["metric"])): float(r["ideal"]) for r in rows}
    return ideals | dict(given or {})


def _first(rank: tuple[int, int] | None) -> bool:
    """Ranked first among more than one model."""
    return rank is not None and rank[0] == 1 and rank[1] > 1


def _cell(
    row: MetricRow | None, ideal: float | None, rank: tuple[int, int] | None, judged: JudgedRow | None = None
) -> dict[str, Any]:
    """One model's value of one metric; a judged metric also shows its corrected value (or why there is none)."""
    if row is None:
        return {
            "value": MISSING,
            "tone": "none",
            "mark": None,
            "sql": None,
            "rank": "",
            "title": "not evaluated",
            "corrected": None,  # every cell has what the template reads (an imported model lacks most tasks)
        }
    shown = summary_row(row, ideal)
    shown["rank"] = f"#{rank[0]}" if rank is not None and rank[1] > 1 else ""
    judge = f" · {judge_text(judged)}" if judged is not None else ""
    shown["title"] = f"{shown['verdict']} · CI {shown['ci']} · n {shown['n']}{judge}"
    shown["corrected"] = corrected_text(judged)
    return shown


def _judged_headlines(conn: duckdb.DuckDBPyConnection, models: Sequence[str]) -> dict[tuple[str, str, str], JudgedRow]:
    """Each model's judged headline values (subset NULL) by (model, task, metric)."""
    return {
        (model, task, metric): judged
        for model in models
        for (task, metric, subset), judged in judged_rows(conn, model).items()
        if subset is None
    }


def render_leaderboard(
    conn: duckdb.DuckDBPyConnection,
    registered: Sequence[RegisteredModel],
    *,
    ideals: Mapping[tuple[str, str], float] | None = None,
    now: datetime | None = None,
) -> LeaderboardPage:
    """Render the page: an overview row per model, then one table per benchmark family."""
    columns_sql = "model, task, subset, metric, value, ci_low, ci_high, n, materialized_at"
    headline = _metric_rows(
        _rows(conn, f"SELECT {columns_sql} FROM metrics WHERE subset IS NULL ORDER BY task, metric, model")  # noqa: S608
    )
    known = {m.id: m for m in registered}
    for model in sorted({row.model for row in headline} - set(known)):
        known[model] = RegisteredModel(model, registered=False)
    models = sorted(known)
    all_ideals, ranks, judged = _ideals(conn, ideals), _ranks(conn), _judged_headlines(conn, models)
    by_key = {(row.model, row.task, row.metric): row for row in headline}
    overview: list[dict[str, Any]] = []
    for model in models:
        mine = [row for row in headline if row.model == model]
        cells = [_cell(row, all_ideals.get((row.task, row.metric)), None) for row in mine]
        letters = [str(c["mark"]) for c in cells if c["mark"]]
        tested = [c for c in cells if c["tone"] in ("good", "bad") and not c["mark"]]
        overview.append(
            {
                "model": model,
                "href": f"{report_dirname(model)}/report.html",
                "parent": known[model].parent or MISSING,
                "mitigation": known[model].mitigation or MISSING,
                "registered": known[model].registered,
                "tasks": len({row.task for row in mine}),
                "biased": sum(1 for c in tested if c["tone"] == "bad"),
                "tested": len(tested),
                "marks": {letter: letters.count(letter) for letter in "ABCD" if letter in letters},
                "firsts": sum(1 for row in mine if _first(ranks.get((model, row.task, row.metric)))),
            }
        )
    overview.sort(key=lambda o: (o["tasks"] == 0, o["biased"] / o["tested"] if o["tested"] else 1.0, o["model"]))
    sections = []
    for family in FAMILIES:
        columns = sorted({(row.task, row.metric) for row in headline if benchmark_family(row.task) == family})
        if not columns:
            continue
        table = []
        for entry in overview:
            model = str(entry["model"])
            if not any((model, t, m) in by_key for t, m in columns):
                continue
            cells = [
                _cell(
                    by_key.get((model, t, m)),
                    all_ideals.get((t, m)),
                    ranks.get((model, t, m)),
                    judged.get((model, t, m)),
                )
                for t, m in columns
            ]
            table.append({"model": model, "href": entry["href"], "cells": cells})
        sections.append(
            {
                "family": family,
                "anchor": family.lower().replace(" ", "-"),
                "columns": [{"task": t, "metric": m} for t, m in columns],
                "rows": table,
            }
        )
    html = (
        _environment()
        .get_template("leaderboard.html.jinja")
        .render(
            generated_at=(now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
            version=__version__,
            overview=overview,
            sections=sections,
        )
    )
    return LeaderboardPage(html, tuple(models), sum(len(s["columns"]) for s in sections))


def save_leaderboard(page: LeaderboardPage, folder: Path | str) -> Path:
    """Write ``<folder>/leaderboard.html`` atomically (readers never see half a page)."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    path = target / "leaderboard.html"
    temporary = path.with_suffix(".html.tmp")
    temporary.write_text(page.html, encoding="utf-8")
    temporary.replace(path)
    return path
