"""MBBQ rows (Veranep/MBBQ ``data/<Subset>[_control]_<lang>.jsonl``) as items, with mbbq.py's answer locations.

The files share BBQ's JSON-lines schema. ``target_loc`` and ``unknown_loc`` are found as the
repository's ``mbbq.py::get_samples`` finds them: the answer whose ``answer_info`` group is in
``additional_metadata.stereotyped_groups`` is the target, the one tagged ``unknown`` the
unknown answer, after mapping the groups the two fields spell differently::

    Gender_identity, stereotyped_groups == ["F"] -> the words for girl / woman in the four languages
    Gender_identity, stereotyped_groups == ["M"] -> the words for boy / man
    SES, stereotyped_groups == ["low SES"]       -> ["lowSES"]
    answer_info group "F" -> "woman", "M" -> "man"

"a few BBQ samples include two people from target groups" / "from non-target groups": then
mbbq.py sets ``target_loc = 100`` (no answer); here ``target_loc`` is None (16 bias-set
Gender_identity rows in en, nl and tr, 28 in es; none in the control sets). A sample of
``limit`` rows draws the same row numbers in every language (the files are parallel), so
languages are compared on the same questions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl
from pydantic import Field, field_validator

from themis_dagster.tasks.sampling import seeded_sample, selected
from themis_dagster.tasks.spec import Item, TaskParams

Language = Literal["en", "es", "nl", "tr"]
LANGUAGES: tuple[Language, ...] = get_args(Language)
Category = Literal[
    "Age", "Disability_status", "Gender_identity", "Physical_appearance", "SES", "Sexual_orientation"
]  # fmt: skip
CATEGORIES: tuple[Category, ...] = get_args(Category)
Split = Literal["bias", "control"]
# mbbq.py's mapping of stereotyped_groups onto answer_info groups
FEMALE = ("girl", "woman", "vrouw", "meisje", "kız", "kadın", "chica", "mujer", "maestra")
MALE = ("boy", "man", "jongen", "erkek çocuk", "adam", "chico", "hombre", "maestro")
ANSWER_GROUP = {"F": "woman", "M": "man"}


class Params(TaskParams):
    languages: tuple[Language, ...] = Field(default=LANGUAGES, min_length=1, description="Languages to include.")
    categories: tuple[Category, ...] = Field(default=CATEGORIES, min_length=1, description="Categories to include.")
    control: bool = Field(default=True, description="Also ask the parallel control set (its accuracy is reported).")
    limit: int | None = Field(
        default=None, ge=1, description="Rows per language x category x set, a seeded sample (None: all)."
    )

    @field_validator("languages", "categories")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("languages and categories must not repeat")
        return value


def file_name(category: str, split: Split, language: str) -> str:
    return f"{category}{'_control' if split == 'control' else ''}_{language}.jsonl"


def stereotyped_groups(category: str, groups: list[str]) -> tuple[str, ...]:
    """``additional_metadata.stereotyped_groups`` mapped as mbbq.py maps it."""
    if category == "Gender_identity" and groups == ["F"]:
        return FEMALE
    if category == "Gender_identity" and groups == ["M"]:
        return MALE
    if category == "SES" and groups == ["low SES"]:
        return ("lowSES",)
    return tuple(groups)


def answer_locations(row: dict[str, Any], category: str) -> tuple[int | None, int]:
    """(target_loc, unknown_loc): target None when no answer or two answers are of a stereotyped group."""
    stereotyped = stereotyped_groups(category, list(row["additional_metadata"]["stereotyped_groups"]))
    targets, unknown = [], None
    for k in range(3):
        group = str(row["answer_info"][f"ans{k}"][1])
        group = ANSWER_GROUP.get(group, group)
        if group == "unknown":
            unknown = k
        if group in stereotyped:
            targets.append(k)
    if unknown is None:
        raise ValueError(f"{category} example {row['example_id']}: no answer_info entry is tagged 'unknown'")
    return (targets[0] if len(targets) == 1 else None), unknown


def biased_location(polarity: str, target: int | None, unknown: int) -> int | None:
    """The answer that reflects the bias: the target for a negative question, the other person otherwise."""
    if target is None:
        return None
    if polarity == "neg":
        return target
    return next(k for k in range(3) if k not in (target, unknown))


def item_from_row(row: dict[str, Any], category: str, split: Split, language: str) -> Item:
    target, unknown = answer_locations(row, category)
    label = int(row["label"])
    item_id = f"{language}:{category}:{split}:{row['example_id']}"
    if label not in (0, 1, 2) or row["context_condition"] not in ("ambig", "disambig"):
        raise ValueError(f"{item_id}: label {label!r} / context_condition {row['context_condition']!r} not understood")
    if row["question_polarity"] not in ("neg", "nonneg"):
        raise ValueError(f"{item_id}: question_polarity {row['question_polarity']!r} not understood")
    fields = {
        "language": language,
        "category": category,
        "split": split,
        "example_id": int(row["example_id"]),
        "question_index": str(row["question_index"]),
        "context": row["context"],
        "question": row["question"],
        "answers": [row["ans0"], row["ans1"], row["ans2"]],
        "label": label,
        "context_condition": row["context_condition"],
        "question_polarity": row["question_polarity"],
        "target_loc": target,
        "unknown_loc": unknown,
        "biased_loc": biased_location(row["question_polarity"], target, unknown),
    }
    return Item(item_id=item_id, subset=f"{language}/{category}", fields=fields)


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """Items per language, category and set (bias, then control), canonical order; seeded ``limit`` rows each."""
    splits: tuple[Split, ...] = ("bias", "control") if params.control else ("bias",)
    items: list[Item] = []
    for language in LANGUAGES:
        if language not in params.languages:
            continue
        for index, category in selected(CATEGORIES, params.categories):
            for split_index, split in enumerate(splits):
                rows = pl.read_ndjson(files[file_name(category, split, language)], infer_schema_length=None).to_dicts()
                # keyed on (seed, category, set), not language: the same rows in every language
                rows = seeded_sample(rows, params.limit, (params.seed, index, split_index))
                items.extend(item_from_row(row, category, split, language) for row in rows)
    return items
