"""CBBQ rows (YFHuangxxxx/CBBQ ``data/<category>/<ambiguous|disambiguous>/<context>.csv``) as items.

The CSVs carry BBQ's columns (UTF-8 with a BOM before ``example_id``); ``question_polarity`` is
``neg`` or ``non_neg``, ``ans2`` is always the UNKNOWN answer (ambiguous rows are all labelled
2). The repository's evaluation scripts count ``ans0`` for a ``neg`` question and ``ans1`` for a
``non_neg`` one as the biased answer (``ans0`` is the targeted group), so ``biased_loc`` is 0 or 1.

Files: the task file lists the ones this project has; a selected category x context outside it
is resolved through the datasets catalog (mirror, cache, then its canonical URL), which fails
naming where it looked and the URL, unless ``absent`` declares it missing: then it is skipped
and the category's score for that context is not reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl
from pydantic import Field, field_validator

from themis_dagster.tasks.dataset_files import task_file
from themis_dagster.tasks.sampling import DistinctCategories, seeded_sample, selected
from themis_dagster.tasks.spec import Item, TaskInputs

Category = Literal[
    "SES", "age", "disability", "disease", "educational_qualification", "ethnicity", "gender",
    "household_registration", "nationality", "physical_appearance", "race", "region", "religion",
    "sexual_orientation",
]  # fmt: skip
CATEGORIES: tuple[Category, ...] = get_args(Category)
Context = Literal["ambiguous", "disambiguous"]
CONTEXTS: tuple[Context, ...] = get_args(Context)
UNKNOWN = 2


class Params(DistinctCategories):
    categories: tuple[Category, ...] = Field(default=CATEGORIES, min_length=1, description="Categories to include.")
    absent: tuple[str, ...] = Field(
        default=(), description="'<category>/<context>' files declared missing: skipped, not looked for."
    )
    limit: int | None = Field(default=None, ge=1, description="Rows per category x context, seeded (None: all).")

    @field_validator("absent")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        known = {f"{category}/{context}" for category in CATEGORIES for context in CONTEXTS}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"absent: {unknown} are not '<category>/<ambiguous|disambiguous>' of CBBQ")
        return value


def file_name(category: str, context: str) -> str:
    return f"{category}_{context}.csv"


def _file(files: dict[str, Path], category: str, context: str, inputs: TaskInputs | None) -> Path:
    """The file from the task's list, else resolved through the datasets catalog (which names its URL if missing)."""
    return task_file("cbbq", file_name(category, context), files, inputs)


def item_from_row(row: dict[str, Any], category: str, context: str) -> Item:
    item_id = f"{category}:{context}:{row['example_id']}"
    polarity, label = row["question_polarity"], int(row["label"])
    if polarity not in ("neg", "non_neg") or label not in (0, 1, 2):
        raise ValueError(f"{item_id}: question_polarity {polarity!r} / label {label!r} not understood")
    fields = {
        "example_id": str(row["example_id"]),
        "category": category,
        "context_condition": context,
        "question_polarity": polarity,
        "context": row["context"],
        "question": row["question"],
        "answers": [row["ans0"], row["ans1"], row["ans2"]],
        "label": label,
        "biased_loc": 0 if polarity == "neg" else 1,
    }
    return Item(item_id=item_id, subset=category, fields=fields)


def load_items(files: dict[str, Path], params: Params, *, inputs: TaskInputs | None = None) -> list[Item]:
    """Items per category (canonical order), ambiguous then disambiguous, ``limit`` rows each, seeded."""
    items: list[Item] = []
    for index, category in selected(CATEGORIES, params.categories):
        for context_index, context in enumerate(CONTEXTS):
            if f"{category}/{context}" in params.absent:
                continue
            frame = pl.read_csv(_file(files, category, context, inputs), infer_schema_length=0)
            rows = frame.rename({column: column.lstrip("\ufeff") for column in frame.columns}).to_dicts()
            rows = seeded_sample(rows, params.limit, (params.seed, index, context_index))
            items.extend(item_from_row(row, category, context) for row in rows)
    return items
