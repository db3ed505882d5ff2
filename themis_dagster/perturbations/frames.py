"""A perturbation applied to a whole prompts frame, as the prompts stage holds it, and its key in the request cache.

The prompts stage builds a frame of requests (``prompts`` columns; ``messages`` as JSON text); a
variant partition's frame is the original's with every text column rewritten by ``apply.py``'s
rules (the same texts, the same ids). Each distinct text is rewritten once.

The request cache keys an answer by the model fingerprint and the request's content
(``engines/fingerprint.py``). A variant's requests are keyed by ``keyed_fingerprint``: the model
fingerprint folded with the perturbation's key (its name, direction and its list's sha256), so a
perturbed request never shares an answer with another perturbation's or the original's, even
where the perturbation left its text unchanged: the identity perturbation is answered by the
engine again, which is what its paired effect of 0 with p = 1 tests.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import polars as pl

from themis_dagster.perturbations.spec import Perturbation

TEXT_COLUMNS = ("context", "continuation", "prompt")


def keyed_fingerprint(model_fingerprint: str, perturbation_key: str) -> str:
    """The fingerprint a variant partition's requests are cached under (see the module docstring)."""
    return hashlib.sha256(f"{model_fingerprint}|perturbation:{perturbation_key}".encode()).hexdigest()


def _rewrite_messages(text: str | None, perturbation: Perturbation) -> str | None:
    if text is None:
        return None
    messages: list[dict[str, Any]] = json.loads(text)
    rewritten = [
        {**message, "content": perturbation.apply(message["content"]).text}
        if isinstance(message.get("content"), str)
        else message
        for message in messages
    ]
    return json.dumps(rewritten, sort_keys=True, default=str) if rewritten != messages else text


def perturb_frame(prompts: pl.DataFrame, perturbation: Perturbation) -> tuple[pl.DataFrame, dict[str, int]]:
    """``prompts`` with every text rewritten, and the counts a materialization reports
    (items, items_changed, items_unchanged, requests_changed)."""
    columns = []
    for name in (*TEXT_COLUMNS, "messages"):
        if name not in prompts.columns:
            continue
        values = prompts.get_column(name)
        distinct = values.drop_nulls().unique().to_list()
        if name == "messages":
            mapping = {text: _rewrite_messages(text, perturbation) for text in distinct}
        else:
            mapping = {text: perturbation.apply(text).text for text in distinct}
        changed = {old: new for old, new in mapping.items() if new != old}
        columns.append(values.replace(changed) if changed else values)
    rewritten = prompts.with_columns(columns)
    moved = pl.Series("_moved", [False] * prompts.height, dtype=pl.Boolean)
    for name in (*TEXT_COLUMNS, "messages"):
        if name in prompts.columns:
            moved = moved | rewritten.get_column(name).ne_missing(prompts.get_column(name))
    per_item = prompts.select("item_id").with_columns(moved).group_by("item_id").agg(pl.col("_moved").any())
    changed_items = int(per_item.get_column("_moved").sum())
    counts = {
        "items": per_item.height,
        "items_changed": changed_items,
        "items_unchanged": per_item.height - changed_items,
        "requests_changed": int(moved.sum()) if prompts.height else 0,
    }
    return rewritten, counts
