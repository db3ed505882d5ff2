"""``reading_disagreements``: the replies a benchmark's own reader and the project's read differently.

A chat task whose benchmark has its own reader (KoBBQ's ``raw2prediction``, MBBQ's ``detect_answer``,
CBBQ's letter test) keeps both readings in every judgment of a reply; its ``reading`` parameter names the
one its metrics use (``kinds/lettered.py``). Here: how many replies of each task the two read
differently, and the replies themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from themis_dagster.warehouse.read.query import rows


@dataclass(frozen=True)
class ReadingAgreement:
    """A task's replies read by both readers, how many they read differently, and the reading its metrics use."""

    task: str
    read: int
    disagreements: int
    reading: str | None


def reading_agreement(conn: duckdb.DuckDBPyConnection, model: str) -> list[ReadingAgreement]:
    """Per task of ``model`` with two readings: the replies read, those read differently, the reading used."""
    found = rows(
        conn,
        """
        SELECT j.task, count(*) AS read, any_value(j.detail->>'$.reading') AS reading,
               (SELECT count(DISTINCT d.item_id) FROM reading_disagreements d
                WHERE d.model = j.model AND d.task = j.task) AS disagreements
        FROM judgments j
        WHERE j.model = ? AND json_exists(j.detail, '$.readings')
        GROUP BY j.model, j.task ORDER BY j.task
        """,
        [model],
    )
    return [ReadingAgreement(str(r["task"]), int(r["read"]), int(r["disagreements"]), r["reading"]) for r in found]


@dataclass(frozen=True)
class ReadingDisagreement:
    """One reply read differently: the letter each reader read (None: no choice), and the reading used."""

    model: str
    task: str
    item_id: str
    subset: str | None
    reply: str | None
    official: str | None
    themis: str | None
    reading: str | None
    outcome: str | None


def reading_disagreements(
    conn: duckdb.DuckDBPyConnection, model: str | None = None, task: str | None = None, *, limit: int = 100
) -> list[ReadingDisagreement]:
    """The replies of ``model`` (or any) on ``task`` (or any) the two readings read differently, by task and item."""
    found = rows(
        conn,
        "SELECT model, task, item_id, subset, reply, official, themis, reading, outcome FROM reading_disagreements "
        "WHERE ($model::VARCHAR IS NULL OR model = $model) AND ($task::VARCHAR IS NULL OR task = $task) "
        "ORDER BY model, task, item_id LIMIT $limit",
        {"model": model, "task": task, "limit": max(1, min(limit, 1000))},
    )
    return [
        ReadingDisagreement(str(r["model"]), str(r["task"]), str(r["item_id"]), r["subset"], r["reply"],
                            r["official"], r["themis"], r["reading"], r["outcome"])
        for r in found
    ]  # fmt: skip
