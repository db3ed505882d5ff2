"""A task's perturbed variants against the original, item by item: which items a perturbation changed, and both
judgments of each.

A variant partition (``<task>__<perturbation>``, docs/counterfactuals.md) keeps the original's item
and request ids. An item is *changed* when any of its requests' texts (context, continuation,
prompt, messages) differs from the original's request of the same id, or the original has no such
request: read from the stored prompts, the one definition the effects (``comparisons/perturbation_store.py``)
and the explorer share.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from themis_dagster.warehouse.read.query import number, optional_rows, rows, scalar

_TEXTS = ("{t}.context", "{t}.continuation", "{t}.prompt", "CAST({t}.messages AS VARCHAR)")
_DIFFERS = " OR ".join(f"{text.format(t='v')} IS DISTINCT FROM {text.format(t='b')}" for text in _TEXTS)
_CHANGED = (
    "SELECT DISTINCT v.item_id FROM prompts v LEFT JOIN prompts b "  # noqa: S608 - fixed column names
    "ON b.model = v.model AND b.task = $base AND b.request_id = v.request_id "
    f"WHERE v.model = $model AND v.task = $variant AND (b.request_id IS NULL OR {_DIFFERS})"
)
_PAIRED = f"""
    WITH changed AS ({_CHANGED})
    SELECT v.item_id, v.subset, c.item_id IS NOT NULL AS changed, o.outcome AS original_outcome,
           o.score AS original_score, v.outcome AS perturbed_outcome, v.score AS perturbed_score,
           (o.outcome IS DISTINCT FROM v.outcome OR o.score IS DISTINCT FROM v.score) AS differs
    FROM judgments v
    JOIN judgments o ON o.model = $model AND o.task = $base AND o.item_id = v.item_id
    LEFT JOIN changed c ON c.item_id = v.item_id
    WHERE v.model = $model AND v.task = $variant
"""  # noqa: S608 - constant text


@dataclass(frozen=True)
class Variant:
    """A perturbed variant of a task with measured effects: how many items it changed and left unchanged."""

    task: str
    base_task: str
    perturbation: str
    n_changed: int
    n_unchanged: int


@dataclass(frozen=True)
class PerturbedItem:
    """One item judged on both sides: whether the perturbation rewrote it, and both outcomes and scores."""

    item_id: str
    subset: str | None
    changed: bool
    original_outcome: str | None
    original_score: float | None
    perturbed_outcome: str | None
    perturbed_score: float | None
    differs: bool


def changed_item_ids(conn: duckdb.DuckDBPyConnection, model: str, base_task: str, variant: str) -> set[str]:
    """The variant's items with a request whose text differs from the original's request of the same id."""
    found = rows(conn, _CHANGED, {"model": model, "base": base_task, "variant": variant})
    return {str(row["item_id"]) for row in found}


def variants(conn: duckdb.DuckDBPyConnection, model: str) -> list[Variant] | None:
    """The variants of ``model`` whose effects were measured (``perturbation_effects``), by name; None without the
    view (an older warehouse)."""
    found = optional_rows(
        conn,
        "SELECT task, any_value(base_task) AS base_task, any_value(perturbation) AS perturbation, "
        "max(n_changed) AS n_changed, max(n_unchanged) AS n_unchanged FROM perturbation_effects WHERE model = ? "
        "GROUP BY task ORDER BY task",
        [model],
    )
    if found is None:
        return None
    return [
        Variant(str(r["task"]), str(r["base_task"]), str(r["perturbation"]), int(r["n_changed"]), int(r["n_unchanged"]))
        for r in found
    ]


def perturbed_items(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    base_task: str,
    variant: str,
    *,
    changed_only: bool = True,
    differing: bool = False,
    limit: int = 50,
    offset: int = 0,
) -> tuple[int, list[PerturbedItem]]:
    """The items both partitions judged (``changed_only``: those the perturbation rewrote; ``differing``: those judged
    differently), how many, and one page of them by item id."""
    params = {"model": model, "base": base_task, "variant": variant, "changed": changed_only, "differs": differing}
    kept = f"FROM ({_PAIRED}) p WHERE (NOT $changed OR p.changed) AND (NOT $differs OR p.differs)"
    total = int(scalar(conn, f"SELECT count(*) {kept}", params) or 0)
    found = rows(
        conn,
        f"SELECT p.* {kept} ORDER BY p.item_id LIMIT $limit OFFSET $offset",
        params | {"limit": max(1, min(int(limit), 500)), "offset": max(0, int(offset))},
    )
    return total, [
        PerturbedItem(
            item_id=str(r["item_id"]),
            subset=r["subset"],
            changed=bool(r["changed"]),
            original_outcome=r["original_outcome"],
            original_score=number(r["original_score"]),
            perturbed_outcome=r["perturbed_outcome"],
            perturbed_score=number(r["perturbed_score"]),
            differs=bool(r["differs"]),
        )
        for r in found
    ]
