"""The figures a family declares for its results (``family.yaml``'s ``report.figures``), drawn by the explorer's
Figures page and the model report.

A family knows which of its metrics make a picture beyond a value and its CI: a distribution per
persona beside a reference, a metric per group sorted, a question's answers beside each group's.
It declares each figure here by the metric or the stored keys it reads, so the platform draws it
without naming the family (``tests/tasks/test_family_guard.py``). Three kinds:

- ``ranked``: one metric's subset values matching ``subsets`` (a regular expression, matched in
  full), each with its CI, sorted by value, the metric's ideal a rule (representativeness per group);
- ``shares``: a metric whose subsets read ``<panel>|<category>`` (a persona and an option), each
  panel's shares as one stacked bar, beside the same subsets of the ``beside`` metric (the reference);
  panels named ``<set>=<member>`` are shown a set at a time;
- ``distribution``: one item at a time, the model's distribution (``model``, a list aligned with
  ``labels`` or a mapping label -> share) beside each named reference distribution (``references``,
  a mapping name -> distribution), each key looked up in the item's judgment ``detail``, then in its
  ``fields``; ``question`` names the text that titles an item, ``shown`` the references drawn at first.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from themis_dagster.errors import StrictModel

KEY = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _Figure(StrictModel):
    title: str = Field(min_length=1, description="What the figure shows, in words (its heading).")
    tasks: tuple[str, ...] = Field(
        default=(), description="The family's tasks it is drawn for (none: every task of the family that has it)."
    )


class RankedFigure(_Figure):
    """A metric's subset values, sorted, with their CIs and the metric's ideal."""

    kind: Literal["ranked"]
    metric: str = Field(min_length=1)
    subsets: re.Pattern[str] = Field(
        default=re.compile(".+"), description="A regular expression the drawn subsets match in full."
    )

    def draws(self, subset: str | None) -> bool:
        """Whether the subset is one of the figure's rows (the headline, None, never is)."""
        return subset is not None and self.subsets.fullmatch(subset) is not None


class SharesFigure(_Figure):
    """Shares per panel and category (subsets ``<panel>|<category>``), beside a reference's."""

    kind: Literal["shares"]
    metric: str = Field(min_length=1)
    beside: str | None = Field(default=None, description="The reference's metric, with the same subsets.")


class DistributionFigure(_Figure):
    """One item's distribution beside each reference distribution it carries."""

    kind: Literal["distribution"]
    model: str = Field(pattern=KEY, description="The model's distribution (a list aligned with labels, or a mapping).")
    references: str = Field(pattern=KEY, description="Reference distributions by name (a mapping).")
    labels: str = Field(pattern=KEY, description="The categories' names, in order.")
    question: str | None = Field(default=None, pattern=KEY, description="The text that titles an item.")
    shown: tuple[str, ...] = Field(default=(), description="References drawn at first (none: the first one).")


FigureSpec = Annotated[RankedFigure | SharesFigure | DistributionFigure, Field(discriminator="kind")]
"""One declared figure (``kind`` says which)."""


def figure_metrics(figure: RankedFigure | SharesFigure | DistributionFigure) -> tuple[str, ...]:
    """The metrics a figure reads (none: a distribution reads stored items)."""
    if isinstance(figure, SharesFigure):
        return (figure.metric,) if figure.beside is None else (figure.metric, figure.beside)
    return (figure.metric,) if isinstance(figure, RankedFigure) else ()
