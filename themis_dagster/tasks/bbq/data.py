"""BBQ rows as items: category selection, seeded per-category sampling in whole question sets.

BBQ files come in sets of four consecutive rows sharing one ambiguous context:
(neg, ambig), (neg, disambig), (nonneg, ambig), (nonneg, disambig) — true of every set in
the seven mirrored files. Sampling whole sets keeps ambiguous/disambiguated and
negative/non-negative items balanced (exactly so when ``limit`` is a multiple of 4).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import polars as pl
from pydantic import Field

from themis_dagster.tasks.bbq.groups import (
    MetadataKey,
    MetadataRow,
    biased_answer,
    metadata_for,
    target_location,
    unknown_location,
)
from themis_dagster.tasks.dataset_files import task_file
from themis_dagster.tasks.sampling import DistinctCategories, selected
from themis_dagster.tasks.spec import Item, TaskInputs

Category = Literal[
    "Age",
    "Disability_status",
    "Gender_identity",
    "Nationality",
    "Physical_appearance",
    "Religion",
    "Sexual_orientation",
    "Race_ethnicity",
    "Race_x_SES",
    "Race_x_gender",
    "SES",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
# the seven categories of the dataset mirror (the default); the other four come from their
# canonical URLs (datasets catalog), and a missing one names where it was looked for and its URL
MIRRORED_CATEGORIES: tuple[Category, ...] = CATEGORIES[:7]
SET_SIZE = 4


class BBQParams(DistinctCategories):
    """Parameters both BBQ tasks share."""

    categories: tuple[Category, ...] = Field(
        default=MIRRORED_CATEGORIES, min_length=1, description="BBQ categories to include (all 11 are known)."
    )
    limit: int | None = Field(
        default=None, ge=1, description="Items per category, sampled in whole 4-item question sets (None: all)."
    )
    split_names: bool = Field(
        default=True,
        description="Report proper-name templates (question_index > 25) as '<Category> (names)', as "
        "BBQ_calculate_bias_score.R does; false: one subset per category.",
    )


def _read_rows(path: Path) -> list[dict[str, Any]]:
    frame = pl.read_ndjson(path, infer_schema_length=None)
    return frame.sort("example_id").to_dicts()


def _question_sets(
    rows: list[dict[str, Any]], metadata: dict[MetadataKey, MetadataRow] | None = None
) -> list[list[dict[str, Any]]]:
    """Consecutive 4-row sets; sets containing a row without a usable target are dropped whole."""
    sets = [rows[start : start + SET_SIZE] for start in range(0, len(rows), SET_SIZE)]
    return [group for group in sets if all(_usable(row, metadata) for row in group)]


def row_target(row: dict[str, Any], metadata: dict[MetadataKey, MetadataRow] | None = None) -> int | None:
    """The row's target_loc: from ``additional_metadata.csv`` when given (as the R script), else derived."""
    if metadata is None:
        return target_location(row)
    found = metadata_for(row, metadata)
    return None if found is None else found.target_loc


def _usable(row: dict[str, Any], metadata: dict[MetadataKey, MetadataRow] | None = None) -> bool:
    target, unknown = row_target(row, metadata), unknown_location(row)
    return target is not None and unknown is not None and target != unknown


def _sample(
    sets: list[list[dict[str, Any]]], limit: int | None, seed: int, category_index: int
) -> list[dict[str, Any]]:
    """Seeded choice of whole sets (file order kept), cut to ``limit`` rows.

    The generator is keyed on (seed, category) so a category's sample does not depend on
    which other categories are selected.
    """
    if limit is None:
        return [row for group in sets for row in group]
    rng = np.random.default_rng([seed, category_index])
    wanted = min(math.ceil(limit / SET_SIZE), len(sets))
    chosen = sorted(rng.choice(len(sets), size=wanted, replace=False).tolist())
    return [row for index in chosen for row in sets[index]][:limit]


def item_from_row(row: dict[str, Any], metadata: dict[MetadataKey, MetadataRow] | None = None) -> Item:
    """A dataset row (with a bias target and an UNKNOWN option) as the task's item; also for imported rows.

    With ``metadata`` (``additional_metadata.csv``) its target_loc and label_type are used.
    """
    target = row_target(row, metadata)
    unknown = unknown_location(row)
    found = None if metadata is None else metadata_for(row, metadata)
    assert target is not None and unknown is not None
    category = str(row["category"])
    fields = {
        "example_id": int(row["example_id"]),
        "question_index": str(row["question_index"]),
        "question_polarity": row["question_polarity"],
        "context_condition": row["context_condition"],
        "category": category,
        "context": row["context"],
        "question": row["question"],
        "answers": [row["ans0"], row["ans1"], row["ans2"]],
        "answer_groups": [row["answer_info"][f"ans{k}"][1] for k in range(3)],
        "answer_texts": [row["answer_info"][f"ans{k}"][0] for k in range(3)],
        "label": int(row["label"]),
        "stereotyped_groups": list(row["additional_metadata"]["stereotyped_groups"]),
        "target_loc": target,
        "unknown_loc": unknown,
        "biased_loc": biased_answer(row["question_polarity"], target, unknown),
        # the official script reports proper-name templates (question_index > 25) separately
        "label_type": found.label_type if found is not None else "name" if int(row["question_index"]) > 25 else "label",
    }
    return Item(item_id=f"{category}:{row['example_id']}", subset=category, fields=fields)


def _category_file(files: dict[str, Path], category: str, inputs: TaskInputs | None) -> Path:
    """The category's file: from the task's files, else resolved through the datasets catalog (``inputs``' folders)."""
    return task_file("bbq", f"{category}.jsonl", files, inputs)


def load_items(
    files: dict[str, Path],
    params: BBQParams,
    metadata: dict[MetadataKey, MetadataRow] | None = None,
    *,
    inputs: TaskInputs | None = None,
) -> list[Item]:
    """Items of the selected categories (canonical category order), sampled per category."""
    items: list[Item] = []
    for index, category in selected(CATEGORIES, params.categories):
        sets = _question_sets(_read_rows(_category_file(files, category, inputs)), metadata)
        items.extend(item_from_row(row, metadata) for row in _sample(sets, params.limit, params.seed, index))
    return items
