"""KoBBQ test samples (naver-ai/KoBBQ ``data/KoBBQ_test_samples.tsv``) as items.

``sample_id`` = ``<category>-<template id><a|b|c|d>-<sample>-<amb|dis>-<bsd|cnt>``; the
repository's ``evaluation/5_evaluation.py::get_df`` reads the category from its first part,
the question type (``bsd`` biased / ``cnt`` counter-biased question) from its fifth, and the
context type from its fourth and the template letter: ``amb``, else ``dis-biased`` for b / d and
``dis-counterb`` for a / c. ``choices`` is a Python list literal of three strings (the last is
the UNKNOWN answer, ``알 수 없음``, the "unknown" of the repository's prompt 1).

``rotated`` asks each sample as ``evaluation/1_preprocess.py::permute`` does: three times, the choices
in the rows of their circulant matrix (``scipy.linalg.circulant``: rotation ``k`` shows choice
``(k - j) mod 3`` as letter ``j``), so every choice, the unknown one too, is once A, once B and once C;
each rotation is an item ``<sample_id>-<k>``, as the script suffixes its samples.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl
from pydantic import Field

from themis_dagster.tasks.sampling import DistinctCategories, seeded_sample, selected
from themis_dagster.tasks.spec import Item

Category = Literal[
    "age", "disability_status", "domestic_area_of_origin", "educational_background", "family_structure",
    "gender_identity", "physical_appearance", "political_orientation", "race_ethnicity_nationality", "religion",
    "ses", "sexual_orientation",
]  # fmt: skip
CATEGORIES: tuple[Category, ...] = get_args(Category)
FILE = "KoBBQ_test_samples.tsv"
LETTERS = "ABC"
ORDERS = tuple(tuple((k - j) % 3 for j in range(3)) for k in range(3))
"""Rotation k's choices by letter, as indices of the file's: (0, 2, 1), (1, 0, 2), (2, 1, 0)."""


class Params(DistinctCategories):
    categories: tuple[Category, ...] = Field(default=CATEGORIES, min_length=1, description="Categories to include.")
    limit: int | None = Field(default=None, ge=1, description="Samples per category, a seeded sample (None: all).")
    unknown_answer: str = Field(
        default="알 수 없음", min_length=1, description="The UNKNOWN choice (prompt 1's 'unknown' in the repository)."
    )


def context_type(sample_id: str) -> tuple[str, str, str, str]:
    """(category, amb | dis, bsd | cnt, amb | dis-biased | dis-counterb) read from ``sample_id`` as get_df reads it."""
    parts = sample_id.split("-")
    if len(parts) != 5 or parts[3] not in ("amb", "dis") or parts[4] not in ("bsd", "cnt") or parts[1][-1:] not in (
        "a", "b", "c", "d"
    ):  # fmt: skip
        raise ValueError(f"sample_id {sample_id!r} is not <category>-<template><a-d>-<n>-<amb|dis>-<bsd|cnt>")
    kind = "amb" if parts[3] == "amb" else "dis-biased" if parts[1][-1] in ("b", "d") else "dis-counterb"
    return parts[0], parts[3], parts[4], kind


def item_from_row(row: dict[str, Any], unknown: str) -> Item:
    sample_id = str(row["sample_id"])
    category, amb_dis, question_type, kind = context_type(sample_id)
    try:
        choices = ast.literal_eval(str(row["choices"]))
    except (ValueError, SyntaxError):
        choices = None
    if not isinstance(choices, list) or len(choices) != 3:
        raise ValueError(f"{sample_id}: field 'choices' is not a list of three: {row['choices']!r}")
    choices = [str(choice) for choice in choices]
    for field in ("answer", "biased_answer"):
        if row[field] not in choices:
            raise ValueError(f"{sample_id}: field {field!r} {row[field]!r} is not one of the choices {choices}")
    if unknown not in choices:
        raise ValueError(f"{sample_id}: the UNKNOWN answer {unknown!r} (unknown_answer) is not among {choices}")
    fields = {
        "sample_id": sample_id,
        "category": category,
        "label_annotation": row["label_annotation"],
        "context": row["context"],
        "question": row["question"],
        "choices": choices,
        "answer": row["answer"],
        "biased_answer": row["biased_answer"],
        "unknown_answer": unknown,
        "amb_dis": amb_dis,
        "question_type": question_type,
        "context_type": kind,
    }
    return Item(item_id=sample_id, subset=category, fields=fields)


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """Samples of the selected categories (canonical order, file order within), ``limit`` each, seeded."""
    frame = pl.read_csv(files[FILE], separator="\t", infer_schema_length=0, quote_char=None)
    by_category: dict[str, list[dict[str, Any]]] = {}
    for row in frame.to_dicts():
        by_category.setdefault(str(row["sample_id"]).split("-")[0], []).append(row)
    unknown_categories = sorted(set(by_category) - set(CATEGORIES))
    if unknown_categories:
        raise ValueError(f"{files[FILE]}: categories {unknown_categories} are not KoBBQ's twelve")
    items: list[Item] = []
    for index, category in selected(CATEGORIES, params.categories):
        rows = seeded_sample(by_category.get(category, []), params.limit, (params.seed, index))
        items.extend(item_from_row(row, params.unknown_answer) for row in rows)
    return items


def rotated(items: list[Item], rotations: int) -> list[Item]:
    """Each sample in its first ``rotations`` orders (``ORDERS``), ``<sample_id>-<k>``; 1: the samples as they are.

    A rotation's item records ``rotation`` (k) and ``unknown_letter`` (where the unknown choice stands)."""
    if rotations == 1:
        return items
    asked: list[Item] = []
    for item in items:
        for k, order in enumerate(ORDERS[:rotations]):
            choices = [item.fields["choices"][index] for index in order]
            unknown = LETTERS[choices.index(item.fields["unknown_answer"])]
            fields = item.fields | {"choices": choices, "rotation": k, "unknown_letter": unknown}
            asked.append(Item(item_id=f"{item.item_id}-{k}", subset=item.subset, fields=fields))
    return asked
