"""Counterfactual pairs: judgments that hold the same request answered for two users, side by side.

A judgment is a *pair* when its ``detail`` holds both replies (``reply_a``, ``reply_b``); the rest of
the shape is what a counterfactual task stores about the two users and their replies
(docs/counterfactuals.md): ``request``, ``request_id``, ``axis``, ``group_a``/``group_b``,
``identity_a``/``identity_b``, ``refused_*``, ``words_*``, ``regard_*``, ``similarity``, and the
judge's pairwise question in both orders, ``pairwise.ab`` (user a's reply shown first) and
``pairwise.ba``, each ``{answer, position, verdict}``, with ``harmful``, ``orders_agree`` and
``position_bias`` read from them. A task is found by the shape of its judgments, never by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb

from themis_dagster.warehouse.read.query import json_object, number, rows, scalar

ORDERS = ("ab", "ba")
T = TypeVar("T")
Sides = tuple[T | None, T | None]
"""A measure of each reply of a pair: user a's, then user b's."""
_PAIRS = """
    FROM judgments j
    WHERE j.model = $model AND j.task = $task AND json_exists(j.detail, '$.reply_a')
      AND ($axis::VARCHAR IS NULL OR json_extract_string(j.detail, '$.axis') = $axis)
      AND (NOT $harmful OR json_extract_string(j.detail, '$.harmful') IN ('1', 'true'))
"""


@dataclass(frozen=True)
class PairRow:
    """One pair in a list: who asked, what each reply measured (user a's first, then b's) and what the judge said in
    each order (``verdicts``: user a's reply shown first, then b's)."""

    item_id: str
    subset: str | None
    outcome: str | None
    request_id: str | None
    axis: str | None
    users: Sides[str]
    groups: Sides[str]
    refused: Sides[bool]
    words: Sides[float]
    regard: Sides[str]
    verdicts: Sides[str]
    harmful: bool | None
    similarity: float | None


def flag(value: object) -> bool | None:
    """A stored yes/no (a bool, or 0 / 1 as a count of it is stored); None for anything else."""
    if isinstance(value, bool):
        return value
    return bool(value) if isinstance(value, int) and value in (0, 1) else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def pair_tasks(conn: duckdb.DuckDBPyConnection, model: str) -> list[str]:
    """The tasks of ``model`` whose judgments are pairs (each task's first judgment read: one shape a task)."""
    found_tasks = rows(conn, "SELECT DISTINCT task FROM judgments WHERE model = ? ORDER BY 1", [model])
    tasks = [str(r["task"]) for r in found_tasks]
    found = []
    for task in tasks:
        first = scalar(
            conn, "SELECT detail FROM judgments WHERE model = ? AND task = ? ORDER BY item_id LIMIT 1", [model, task]
        )
        detail = json_object(first)
        if "reply_a" in detail and "reply_b" in detail:
            found.append(task)
    return found


def pair_axes(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> list[str]:
    """The identity axes the task's pairs cover, by name."""
    query = "SELECT list(DISTINCT axis ORDER BY axis) FROM (SELECT json_extract_string(detail, '$.axis') AS axis "
    axes = scalar(conn, query + "FROM judgments WHERE model = $model AND task = $task) WHERE axis IS NOT NULL",
                  {"model": model, "task": task})  # fmt: skip
    return [str(axis) for axis in axes or []]


def _sides(detail: dict[str, Any], key: str, read: Callable[[object], T | None]) -> Sides[T]:
    return read(detail.get(f"{key}_a")), read(detail.get(f"{key}_b"))


def pair_row(item_id: str, subset: str | None, outcome: str | None, detail: dict[str, Any]) -> PairRow:
    """A pair's list row from its judgment's detail."""
    pairwise = detail.get("pairwise")
    orders = [json_object(pairwise.get(order) if isinstance(pairwise, dict) else None) for order in ORDERS]
    return PairRow(
        item_id=item_id,
        subset=subset,
        outcome=outcome,
        request_id=_text(detail.get("request_id")),
        axis=_text(detail.get("axis")),
        users=_sides(detail, "identity", _text),
        groups=_sides(detail, "group", _text),
        refused=_sides(detail, "refused", flag),
        words=_sides(detail, "words", number),
        regard=_sides(detail, "regard", _text),
        verdicts=(_text(orders[0].get("verdict")), _text(orders[1].get("verdict"))),
        harmful=flag(detail.get("harmful")),
        similarity=number(detail.get("similarity")),
    )


def pairs(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    task: str,
    *,
    axis: str | None = None,
    harmful: bool = False,
    limit: int = 50,
    offset: int = 0,
) -> tuple[int, list[PairRow]]:
    """How many pairs of (model, task) there are (of one ``axis``; ``harmful``: only those both orders of the judge
    named the same user treated worse), and one page of them by item id."""
    params = {"model": model, "task": task, "axis": axis, "harmful": harmful}
    total = int(scalar(conn, f"SELECT count(*) {_PAIRS}", params) or 0)
    found = rows(
        conn,
        f"SELECT j.item_id, j.subset, j.outcome, j.detail {_PAIRS} ORDER BY j.item_id LIMIT $limit OFFSET $offset",
        params | {"limit": max(1, min(int(limit), 500)), "offset": max(0, int(offset))},
    )
    return total, [pair_row(str(r["item_id"]), r["subset"], r["outcome"], json_object(r["detail"])) for r in found]
