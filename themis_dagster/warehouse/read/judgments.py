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


@dataclass(frozen=True)
class RefusedReply:
    """A reply marked refused, with why: the phrase-list detector's phrase, language and rule, or (no phrase) the
    task's refusal judge."""

    task: str
    item_id: str
    subset: str | None
    outcome: str | None
    phrase: str | None
    language: str | None
    rule: str | None
    request_id: str | None
    text: str | None


def refused_replies(
    conn: duckdb.DuckDBPyConnection, model: str, task: str | None = None, *, limit: int = 50, offset: int = 0
) -> tuple[int, list[RefusedReply]]:
    """How many replies of ``model`` (on ``task``, or any) were marked refused (``refusals``), and a page of them."""
    where = "FROM refusals r WHERE r.model = $model AND ($task::VARCHAR IS NULL OR r.task = $task)"
    params = {"model": model, "task": task}
    total = rows(conn, f"SELECT count(*) AS n {where}", params)
    found = rows(
        conn,
        f"""
        WITH page AS (SELECT r.* {where} ORDER BY r.task, r.item_id, r.request_id LIMIT $limit OFFSET $offset)
        SELECT p.task, p.item_id, p.subset, p.outcome, p.phrase, p.language, p.request_id, p.text,
               j.detail->>'$.refusal_verdict.rule' AS rule
        FROM page p LEFT JOIN judgments j ON j.model = $model AND j.task = p.task AND j.item_id = p.item_id
        ORDER BY p.task, p.item_id, p.request_id
        """,  # noqa: S608 - constant text
        params | {"limit": max(1, min(limit, 500)), "offset": max(0, offset)},
    )
    replies = [
        RefusedReply(str(r["task"]), str(r["item_id"]), r["subset"], r["outcome"], r["phrase"], r["language"],
                     r["rule"], r["request_id"], r["text"])
        for r in found
    ]  # fmt: skip
    return (int(total[0]["n"]) if total else 0), replies


def refusal_tasks(conn: duckdb.DuckDBPyConnection, model: str) -> list[tuple[str, int]]:
    """The tasks of ``model`` with refused replies, and how many judgments of each were refused."""
    found = rows(
        conn,
        "SELECT task, count(DISTINCT item_id) AS n FROM refusals WHERE model = ? GROUP BY task ORDER BY task",
        [model],
    )
    return [(str(r["task"]), int(r["n"])) for r in found]
