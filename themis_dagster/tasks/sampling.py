"""Which rows a run evaluates: the categories chosen (each named once), and a seeded sample of each group of rows.

The BBQ-style data readers (BBQ, EsBBQ, KoBBQ, CBBQ, MBBQ) share these. A sample's generator is
keyed on the seed and the group (its category's index in the canonical order, and the set or
context where a category has several files), so a group's sample does not depend on which
other groups are selected.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeVar

import numpy as np
from pydantic import field_validator

from themis_dagster.tasks.spec import TaskParams, distinct

Row = TypeVar("Row")
Category = TypeVar("Category", bound=str)


class DistinctCategories(TaskParams):
    """Parameters whose ``categories`` (declared by the subclass) must not repeat."""

    @field_validator("categories", check_fields=False)
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return distinct(value, "categories must not repeat")


def seeded_sample(rows: list[Row], limit: int | None, key: Sequence[int]) -> list[Row]:
    """``limit`` of the rows drawn without replacement by a generator keyed on ``key`` (the seed first), in file
    order; all of them when ``limit`` is None or not below their number."""
    if limit is None or limit >= len(rows):
        return rows
    rng = np.random.default_rng(list(key))
    return [rows[i] for i in sorted(rng.choice(len(rows), size=limit, replace=False).tolist())]


def selected(categories: Sequence[Category], chosen: Collection[str]) -> list[tuple[int, Category]]:
    """The chosen categories in their canonical order, each with its index there (part of its sample's key)."""
    return [(index, category) for index, category in enumerate(categories) if category in chosen]
