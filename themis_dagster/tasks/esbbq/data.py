"""EsBBQ / CaBBQ rows as items, in the fields of lm-eval's ``esbbq`` / ``cabbq`` datasets.

The repository's ``<Category>.full.csv`` files flatten BBQ's nested fields (``answer_info.ans0``
holds a Python list literal such as ``"['abuelo', 'old']"``, ``stereotyped_groups`` one such
as ``"['old']"``); they are parsed back into lists. ``ans2`` is always the UNKNOWN option
(the literal ``unknown``; the prompt offers lm-eval's nine wordings of it instead).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl
from pydantic import Field

from themis_dagster.tasks.sampling import DistinctCategories, seeded_sample, selected
from themis_dagster.tasks.spec import Item

Category = Literal[
    "Age",
    "DisabilityStatus",
    "Gender",
    "LGBTQIA",
    "Nationality",
    "PhysicalAppearance",
    "RaceEthnicity",
    "Religion",
    "SES",
    "SpanishRegion",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)


class Params(DistinctCategories):
    language: Literal["es", "ca"] = Field(default="es", description="es: EsBBQ, ca: CaBBQ (the task file sets it).")
    categories: tuple[Category, ...] = Field(default=CATEGORIES, min_length=1, description="Categories to include.")
    limit: int | None = Field(default=None, ge=1, description="Items per category, a seeded sample (None: all).")
    template: str = Field(default="esbbq_context", min_length=1, description="Context template (templates file).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between context and each answer.")


@lru_cache(maxsize=65536)
def _parse_list(text: str) -> tuple[str, ...] | None:
    """A Python list literal's items as strings (None if it is not one); the files repeat them a lot."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return tuple(str(part) for part in value) if isinstance(value, list) else None


def _literal_list(text: str | None, field: str, row_id: str) -> list[str]:
    parsed = _parse_list(text or "[]")
    if parsed is None:
        raise ValueError(f"{row_id}: field {field!r} is not a list literal: {text!r}")
    return list(parsed)


def _item(row: dict[str, Any], category: str) -> Item:
    row_id = f"{category}:{row['instance_id']}"
    label = int(row["label"])
    if label not in (0, 1, 2) or row["context_condition"] not in ("ambig", "disambig"):
        raise ValueError(f"{row_id}: label {label!r} / context_condition {row['context_condition']!r} not understood")
    fields = {
        "instance_id": int(row["instance_id"]),
        "template_id": row["template_id"],
        "category": category,
        "context": row["context"],
        "question": row["question"],
        "ans0": row["ans0"],
        "ans1": row["ans1"],
        "label": label,
        "context_condition": row["context_condition"],
        "question_polarity": row["question_polarity"],
        "question_type": row["question_type"],
        "answer_info": {
            f"ans{k}": _literal_list(row[f"answer_info.ans{k}"], f"answer_info.ans{k}", row_id) for k in range(3)
        },
        "stereotyped_groups": _literal_list(row["stereotyped_groups"], "stereotyped_groups", row_id),
        "subcategory": row.get("subcategory"),
    }
    return Item(item_id=row_id, subset=category, fields=fields)


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """Items of the selected categories (canonical order); ``limit`` rows per category, seeded, file order kept."""
    items: list[Item] = []
    for index, category in selected(CATEGORIES, params.categories):
        rows = pl.read_csv(files[f"{category}.full.csv"], infer_schema_length=0).to_dicts()
        items.extend(_item(row, category) for row in seeded_sample(rows, params.limit, (params.seed, index)))
    return items
