"""CBBQ rows (YFHuangxxxx/CBBQ ``data/<category>/<ambiguous|disambiguous>/<context>.csv``) as items.

The CSVs carry BBQ's columns (UTF-8 with a BOM before ``example_id``); ``question_polarity`` is
``neg`` or ``non_neg``, ``ans2`` is always the UNKNOWN answer (ambiguous rows are all labelled
2). The repository's evaluation scripts count ``ans0`` for a ``neg`` question and ``ans1`` for a
``non_neg`` one as the biased answer (``ans0`` is the targeted group), so ``biased_loc`` is 0 or 1.

Files: the task file lists the ones this project has; a selected category x context outside it
is resolved through the datasets catalog (mirror, cache, then its canonical URL), which fails
naming where it looked and the URL, unless ``absent`` declares it missing: then it is skipped
and the category's score for that context is not reported.

Holes: some published rows still carry a name marker the repository's ``generate_r.py`` never
filled, because the template misspelt it (``{{NMAE1}}``, ``{{NAM1}}``, ``{{NAME2]}``, ``{{NAME2}人``,
``NAME2}}``). Which value the marker stood for depends on which of the two sentences the script
wrote for that row (it writes each pair with the names swapped), and where both markers were
misspelt the row does not say, so no row is repaired: every row whose texts carry a marker is
dropped, counted per file and logged (``holed``), and the family declares ``{X}`` and ``{{ x }}``
so the prompts stage fails on any that would still reach a model.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl
from pydantic import Field, field_validator

from themis_dagster.tasks.dataset_files import task_file
from themis_dagster.tasks.placeholders import holes
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
TEXTS = ("context", "question", "ans0", "ans1", "ans2")
# a name marker of generate_r.py however misspelt: NAME1, NMAE1, NAM1 ... with a brace or bracket on either side
_MARKER = re.compile(r"[{\[]\s*N[A-Z]{1,3}E?\d|N[A-Z]{1,3}E?\d\s*[\]}]")
_log = logging.getLogger(__name__)


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


def is_holed(row: dict[str, Any]) -> bool:
    """Whether one of the row's texts carries a name marker the dataset's generation left unfilled."""
    return any(holes(text, ("{X}", "{{ x }}")) or _MARKER.search(text) for text in _texts(row))


def _texts(row: dict[str, Any]) -> Iterable[str]:
    return (str(row[name]) for name in TEXTS if row.get(name) is not None)


def holed(rows: list[dict[str, Any]], where: str) -> tuple[list[dict[str, Any]], int]:
    """The rows without a hole, and how many were dropped (logged, naming ``where``, when any)."""
    kept = [row for row in rows if not is_holed(row)]
    dropped = len(rows) - len(kept)
    if dropped:
        _log.warning("CBBQ %s: %d of %d rows dropped: a name marker left unfilled in the published data",
                     where, dropped, len(rows))  # fmt: skip
    return kept, dropped


def read_rows(path: Path, category: str, context: str) -> list[dict[str, Any]]:
    """A file's rows (BOM stripped from the header), those with a hole dropped (``holed``)."""
    frame = pl.read_csv(path, infer_schema_length=0)
    rows = frame.rename({column: column.lstrip("\ufeff") for column in frame.columns}).to_dicts()
    return holed(rows, f"{category}/{context}")[0]


def load_items(files: dict[str, Path], params: Params, *, inputs: TaskInputs | None = None) -> list[Item]:
    """Items per category (canonical order), ambiguous then disambiguous, ``limit`` rows each, seeded, of the rows
    without a hole (``holed``)."""
    items: list[Item] = []
    for index, category in selected(CATEGORIES, params.categories):
        for context_index, context in enumerate(CONTEXTS):
            if f"{category}/{context}" in params.absent:
                continue
            rows = read_rows(_file(files, category, context, inputs), category, context)
            rows = seeded_sample(rows, params.limit, (params.seed, index, context_index))
            items.extend(item_from_row(row, category, context) for row in rows)
    return items
