"""One item's answer distribution beside its reference distributions, as a family's ``distribution`` figure names
them (``tasks/figures.py``): the keys are looked up in the item's judgment ``detail``, then in its ``fields``.

A distribution is stored as a list aligned with the item's labels (the first ones, when it covers
fewer: OpinionQA's ordinal options before "Refused") or as a mapping label -> share; both read as
:class:`Distribution`. Keys reach SQL only as bound JSON paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from themis_dagster.warehouse.read.query import json_object, number, rows

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JOINED = """
    FROM judgments j
    LEFT JOIN task_items t ON t.model = j.model AND t.task = j.task AND t.item_id = j.item_id
    WHERE j.model = $model AND j.task = $task AND j.parsed
      AND (json_exists(j.detail, '$.' || $key) OR json_exists(t.fields, '$.' || $key))
"""


@dataclass(frozen=True)
class DistributionItem:
    """An item that holds a distribution: its id, subset and the text that titles it."""

    item_id: str
    subset: str | None
    question: str | None


@dataclass(frozen=True)
class ItemDistribution:
    """One item's distribution (``model``) and each reference's, over ``labels``; a label a distribution does not
    cover reads as None."""

    item_id: str
    subset: str | None
    question: str | None
    labels: list[str]
    model: list[float | None]
    references: dict[str, list[float | None]] = field(default_factory=dict)


def _key(name: str) -> str:
    if not _KEY.fullmatch(name):
        raise ValueError(f"not a key of a stored item: {name!r}")
    return name


def distribution_items(
    conn: duckdb.DuckDBPyConnection, model: str, task: str, key: str, question: str | None = None
) -> list[DistributionItem]:
    """The parsed items of (model, task) whose judgment or item holds ``key``, by id; ``question`` titles each."""
    params: dict[str, object] = {"model": model, "task": task, "key": _key(key)}
    title = "NULL"
    if question is not None:
        params["question"] = _key(question)
        title = "coalesce(j.detail->>('$.' || $question), t.fields->>('$.' || $question))"
    found = rows(conn, f"SELECT j.item_id, j.subset, {title} AS question {_JOINED} ORDER BY j.item_id", params)
    return [DistributionItem(str(r["item_id"]), r["subset"], r["question"]) for r in found]


def aligned(value: object, labels: Sequence[str]) -> list[float | None]:
    """A stored distribution over ``labels``: a list by position, a mapping by label; anything else: all None."""
    if isinstance(value, Mapping):
        return [number(value.get(label)) for label in labels]
    if isinstance(value, list):
        return [number(value[i]) if i < len(value) else None for i in range(len(labels))]
    return [None] * len(labels)


def item_distribution(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    task: str,
    item_id: str,
    keys: Mapping[str, str | None],
) -> ItemDistribution | None:
    """The item's distributions as ``keys`` names them (``model``, ``references``, ``labels``, ``question``: the
    figure's fields); None when (model, task) has no such judgment. Labels are the stored ones, or the model's
    mapping's keys; a list longer than the labels is cut to them."""
    found = rows(
        conn,
        "SELECT j.item_id, j.subset, j.detail, t.fields FROM judgments j LEFT JOIN task_items t ON t.model = j.model "
        "AND t.task = j.task AND t.item_id = j.item_id WHERE j.model = ? AND j.task = ? AND j.item_id = ?",
        [model, task, item_id],
    )
    if not found:
        return None
    detail, fields = json_object(found[0]["detail"]), json_object(found[0]["fields"])

    def stored(name: str | None) -> Any:
        if name is None:
            return None
        return detail[_key(name)] if name in detail else fields.get(_key(name))

    produced = stored(keys["model"])
    labels = [str(label) for label in stored(keys["labels"]) or []]
    if not labels and isinstance(produced, Mapping):
        labels = [str(label) for label in produced]
    if isinstance(produced, list) and len(produced) < len(labels):
        labels = labels[: len(produced)]  # the distribution covers the first labels only (the ordinal options)
    references = stored(keys["references"])
    question = stored(keys.get("question"))
    return ItemDistribution(
        item_id=str(found[0]["item_id"]),
        subset=found[0]["subset"],
        question=None if question is None else str(question),
        labels=labels,
        model=aligned(produced, labels),
        references={str(name): aligned(value, labels) for name, value in (references or {}).items()}
        if isinstance(references, Mapping)
        else {},
    )
