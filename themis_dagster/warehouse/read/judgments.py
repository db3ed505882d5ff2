"""What became of the replies: ``parse_rates`` and ``parse_failures`` (judgments that could not be interpreted,
with the replies behind them) and ``refusals`` (replies the refusal detector marked)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from themis_dagster.warehouse.read.query import rows

DETECTOR = "refused (detector)"  # the outcome shown for judgments the refusal detector marked


@dataclass(frozen=True)
class ParseFailures:
    """A task's judgments that could not be interpreted, with their outcomes and a few examples."""

    task: str
    judged: int
    failed: int
    outcomes: list[tuple[str, int]] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)


def parse_failures(conn: duckdb.DuckDBPyConnection, model: str, examples: int) -> list[ParseFailures]:
    """Per task of ``model``: judged and failed counts, the failed outcomes, and ``examples`` replies of each."""
    counts = rows(
        conn, "SELECT task, judged, judged - parsed AS failed FROM parse_rates WHERE model = ? ORDER BY task", [model]
    )
    outcomes = rows(
        conn,
        "SELECT task, coalesce(outcome, '(none)') AS outcome, count(DISTINCT item_id) AS n FROM parse_failures "
        "WHERE model = ? GROUP BY ALL ORDER BY task, n DESC, outcome",
        [model],
    )
    samples = rows(
        conn,
        "SELECT task, item_id, outcome, text, error, reasoning FROM parse_failures WHERE model = ? "
        "QUALIFY row_number() OVER (PARTITION BY task ORDER BY item_id, request_id) <= ?",
        [model, examples],
    )
    return [
        ParseFailures(
            task=str(row["task"]),
            judged=int(row["judged"]),
            failed=int(row["failed"]),
            outcomes=[(str(o["outcome"]), int(o["n"])) for o in outcomes if o["task"] == row["task"]],
            examples=[s for s in samples if s["task"] == row["task"]],
        )
        for row in counts
    ]


@dataclass(frozen=True)
class RefusalCount:
    """How many of a task's judgments have an outcome that says refused, or were marked by the detector
    (outcome :data:`DETECTOR`)."""

    task: str
    outcome: str
    judgments: int


def refusal_counts(conn: duckdb.DuckDBPyConnection, model: str) -> list[RefusalCount]:
    """Per task of ``model``: judgments whose outcome names a refusal, and those the detector marked (``refusals``)."""
    found = rows(
        conn,
        "SELECT task, outcome, count(*) AS judgments FROM judgments WHERE model = ? AND outcome ILIKE '%refus%' "
        "GROUP BY ALL UNION ALL SELECT task, ? AS outcome, count(DISTINCT item_id) AS judgments FROM refusals "
        "WHERE model = ? GROUP BY ALL ORDER BY task, outcome",
        [model, DETECTOR, model],
    )
    return [RefusalCount(str(r["task"]), str(r["outcome"]), int(r["judgments"])) for r in found]
