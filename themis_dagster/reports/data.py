"""Everything a model report shows, read through the warehouse's read layer (``warehouse/read``).

Reads only: the report runs on a read-only connection. The names the report modules share
(:class:`MetricRow`, :class:`JudgedRow`, :class:`RunRecord`...) are the read layer's records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import duckdb

from themis_dagster.warehouse.read import catalog, judgments, metrics, runs
from themis_dagster.warehouse.read.ideals import Ideals as DeclaredIdeals
from themis_dagster.warehouse.read.ideals import metric_ideals
from themis_dagster.warehouse.read.judged import JudgedKey, JudgedRow, judged_rows
from themis_dagster.warehouse.read.judgments import ParseFailures
from themis_dagster.warehouse.read.leaderboard import Rank, ranked_like_the_leaderboard, ranks
from themis_dagster.warehouse.read.metrics import MetricRecord
from themis_dagster.warehouse.read.runs import RunRecord, dig, parse_config

__all__ = [
    "Ideals",
    "JudgedKey",
    "JudgedRow",
    "MetricRow",
    "ParseFailures",
    "Rank",
    "ReportData",
    "RunRecord",
    "dig",
    "judged_rows",
    "known_models",
    "load_report_data",
    "parse_config",
]

Ideals = Mapping[tuple[str, str], float]
MetricRow = MetricRecord  # a task's MetricValue fields (subset None: the headline value), its model and task
known_models = catalog.known_models


@dataclass
class ReportData:
    model: str
    headline: list[MetricRow]
    subsets: list[MetricRow]
    all_headline: list[MetricRow]
    history: list[MetricRow]
    ideals: dict[tuple[str, str], float]
    ranks: dict[tuple[str, str], Rank]
    parse_failures: list[ParseFailures]
    runs: list[RunRecord]
    family: list[str]
    judged: dict[JudgedKey, JudgedRow] = field(default_factory=dict)
    higher_is_better: dict[tuple[str, str], bool] = field(default_factory=dict)  # the declared directions

    @property
    def declared(self) -> DeclaredIdeals:
        """The ideals and directions as the read layer's verdicts take them."""
        return DeclaredIdeals(self.ideals, self.higher_is_better)


def _ranks(
    conn: duckdb.DuckDBPyConnection, model: str, all_headline: list[MetricRow], ideals: DeclaredIdeals
) -> dict[tuple[str, str], Rank]:
    """Rank on the leaderboard table; where it has no row yet, ranked the same way (|value - ideal|, ties share)."""
    found = {(task, metric): rank for (_, task, metric), rank in ranks(conn, model).items()}
    for (_, task, metric), rank in ranked_like_the_leaderboard(model, all_headline, ideals).items():
        found.setdefault((task, metric), rank)
    return found


def load_report_data(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    *,
    ideals: Ideals | None = None,
    family: Sequence[str] | None = None,
    failure_examples: int = 3,
) -> ReportData:
    """Read what the report of ``model`` needs; ``family`` lists its checkpoints in order (default: itself).

    ``ideals`` adds or overrides declared ideals (``warehouse/read/ideals.py`` says where the others come from).
    """
    members = list(family) if family else [model]
    if model not in members:
        members.append(model)
    all_headline = metrics.headline(conn)
    declared = metric_ideals(conn, ideals)
    return ReportData(
        model=model,
        headline=[row for row in all_headline if row.model == model],
        subsets=metrics.subsets(conn, model),
        all_headline=all_headline,
        history=metrics.history(conn, members),
        ideals=declared.values,
        ranks=_ranks(conn, model, all_headline, declared),
        parse_failures=judgments.parse_failures(conn, model, failure_examples),
        runs=runs.latest_runs(conn, model),
        family=members,
        judged=judged_rows(conn, model),
        higher_is_better=declared.higher_is_better,
    )
