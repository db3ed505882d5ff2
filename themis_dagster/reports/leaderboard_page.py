"""The multi-model leaderboard page: every registered model, per benchmark family, side by side.

Reads the headline values (``metrics``), the declared ideals, the ``leaderboard`` table's ranks and the
judged values through the read layer (``warehouse/read``) on a read-only connection; models registered
but not evaluated yet are listed as such. Each model's "biased" count is the read layer's
(:func:`~themis_dagster.warehouse.read.verdicts.bias_count`), as on its report and its explorer page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from themis_dagster import __version__
from themis_dagster.reports.data import JudgedRow, MetricRow
from themis_dagster.reports.formatting import MISSING
from themis_dagster.reports.judged_text import corrected_text, judge_text
from themis_dagster.reports.model_report import _environment, report_dirname
from themis_dagster.reports.summary import FAMILIES, benchmark_family, summary_row
from themis_dagster.warehouse.read import metrics, runs
from themis_dagster.warehouse.read.ideals import metric_ideals
from themis_dagster.warehouse.read.judged import judged_headlines
from themis_dagster.warehouse.read.leaderboard import ranks as leaderboard_ranks
from themis_dagster.warehouse.read.verdicts import bias_count, judge_withholds


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


def _first(rank: tuple[int, int] | None) -> bool:
    """Ranked first among more than one model."""
    return rank is not None and rank[0] == 1 and rank[1] > 1


def _cell(
    row: MetricRow | None,
    ideal: float | None,
    rank: tuple[int, int] | None,
    judged: JudgedRow | None = None,
    higher_is_better: bool | None = None,
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
    shown = summary_row(row, ideal, judged_by=judged, higher_is_better=higher_is_better)
    shown["rank"] = "apart" if shown["apart"] else f"#{rank[0]}" if rank is not None and rank[1] > 1 else ""
    judge = f" · {judge_text(judged)}" if judged is not None else ""
    shown["title"] = f"{shown['verdict']} · CI {shown['ci']} · n {shown['n']}{judge}"
    shown["corrected"] = corrected_text(judged)
    return shown


def render_leaderboard(
    conn: duckdb.DuckDBPyConnection,
    registered: Sequence[RegisteredModel],
    *,
    ideals: Mapping[tuple[str, str], float] | None = None,
    now: datetime | None = None,
) -> LeaderboardPage:
    """Render the page: an overview row per model, then one table per benchmark family."""
    headline = metrics.headline(conn)
    known = {m.id: m for m in registered}
    for model in sorted({row.model for row in headline} - set(known)):
        known[model] = RegisteredModel(model, registered=False)
    models = sorted(known)
    declared = metric_ideals(conn, ideals)
    all_ideals, directions, judged = declared.values, declared.higher_is_better, judged_headlines(conn, models)
    ranks = {key: (rank.rank, rank.of) for key, rank in leaderboard_ranks(conn).items()}
    by_key = {(row.model, row.task, row.metric): row for row in headline}
    overview: list[dict[str, Any]] = []
    dtypes = runs.dtypes(conn)  # the dtype each model's answers were computed in (model_precision)
    for model in models:
        mine = [row for row in headline if row.model == model]
        cells = [_cell(row, all_ideals.get((row.task, row.metric)), None) for row in mine]
        letters = [str(c["mark"]) for c in cells if c["mark"]]
        count = bias_count(mine, declared, {(t, m, None): j for (who, t, m), j in judged.items() if who == model})
        overview.append(
            {
                "model": model,
                "href": f"{report_dirname(model)}/report.html",
                "parent": known[model].parent or MISSING,
                "mitigation": known[model].mitigation or MISSING,
                "dtype": ", ".join(dtypes.get(model, [])) or MISSING,
                "registered": known[model].registered,
                "tasks": len({row.task for row in mine}),
                "biased": count.biased,
                "tested": count.tested,
                "marks": {letter: letters.count(letter) for letter in "ABCD" if letter in letters},
                "firsts": sum(
                    1
                    for row in mine
                    if _first(ranks.get((model, row.task, row.metric)))
                    and judge_withholds(judged.get((model, row.task, row.metric))) is None
                ),
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
                    directions.get((t, m)),
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
