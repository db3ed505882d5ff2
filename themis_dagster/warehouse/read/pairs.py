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

import json
from dataclasses import dataclass
from typing import Any

import duckdb

from themis_dagster.warehouse.read.query import number, rows, scalar

ORDERS = ("ab", "ba")
_PAIRS = """
    FROM judgments j
    WHERE j.model = $model AND j.task = $task AND json_exists(j.detail, '$.reply_a')
      AND ($axis::VARCHAR IS NULL OR json_extract_string(j.detail, '$.axis') = $axis)
      AND (NOT $harmful OR json_extract_string(j.detail, '$.harmful') IN ('1', 'true'))
"""


@dataclass(frozen=True)
class PairRow:
    """One pair in a list: who asked, what the replies measured and what the judge said in each order."""

    item_id: str
    subset: str | None
    outcome: str | None
    request_id: str | None
    axis: str | None
    user_a: str | None
    user_b: str | None
    group_a: str | None
    group_b: str | None
    harmful: bool | None
    verdict_ab: str | None
    verdict_ba: str | None
    refused_a: bool | None
    refused_b: bool | None
    words_a: float | None
    words_b: float | None
    regard_a: str | None
    regard_b: str | None
    similarity: float | None


def flag(value: object) -> bool | None:
    """A stored yes/no (a bool, or 0 / 1 as a count of it is stored); None for anything else."""
    if isinstance(value, bool):
        return value
    return bool(value) if isinstance(value, int) and value in (0, 1) else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _json(raw: object) -> dict[str, Any]:
    try:
        parsed = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def pair_tasks(conn: duckdb.DuckDBPyConnection, model: str) -> list[str]:
    """The tasks of ``model`` whose judgments are pairs (each task's first judgment read: one shape a task)."""
    found_tasks = rows(conn, "SELECT DISTINCT task FROM judgments WHERE model = ? ORDER BY 1", [model])
    tasks = [str(r["task"]) for r in found_tasks]
    found = []
    for task in tasks:
        first = scalar(
            conn, "SELECT detail FROM judgments WHERE model = ? AND task = ? ORDER BY item_id LIMIT 1", [model, task]
        )
        detail = _json(first)
        if "reply_a" in detail and "reply_b" in detail:
            found.append(task)
    return found


def pair_axes(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> list[str]:
    """The identity axes the task's pairs cover, by name."""
    found = rows(
        conn,
        "SELECT DISTINCT json_extract_string(detail, '$.axis') AS axis FROM judgments WHERE model = ? AND task = ? "
        "AND json_extract_string(detail, '$.axis') IS NOT NULL ORDER BY 1",
        [model, task],
    )
    return [str(r["axis"]) for r in found]


def pair_row(item_id: str, subset: str | None, outcome: str | None, detail: dict[str, Any]) -> PairRow:
    """A pair's list row from its judgment's detail."""
    pairwise = detail.get("pairwise")
    verdicts = {
        order: _json(pairwise.get(order) if isinstance(pairwise, dict) else None).get("verdict") for order in ORDERS
    }
    return PairRow(
        item_id=item_id,
        subset=subset,
        outcome=outcome,
        request_id=_text(detail.get("request_id")),
        axis=_text(detail.get("axis")),
        user_a=_text(detail.get("identity_a")),
        user_b=_text(detail.get("identity_b")),
        group_a=_text(detail.get("group_a")),
        group_b=_text(detail.get("group_b")),
        harmful=flag(detail.get("harmful")),
        verdict_ab=_text(verdicts["ab"]),
        verdict_ba=_text(verdicts["ba"]),
        refused_a=flag(detail.get("refused_a")),
        refused_b=flag(detail.get("refused_b")),
        words_a=number(detail.get("words_a")),
        words_b=number(detail.get("words_b")),
        regard_a=_text(detail.get("regard_a")),
        regard_b=_text(detail.get("regard_b")),
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
    return total, [pair_row(str(r["item_id"]), r["subset"], r["outcome"], _json(r["detail"])) for r in found]
