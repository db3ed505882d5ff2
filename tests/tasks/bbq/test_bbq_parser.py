"""BBQ's reply parser: the reply shapes it reads (letters, announced letters, option wordings) and the ones it
leaves unread, and that it never raises."""

from __future__ import annotations

import pytest

from themis_dagster.tasks.bbq.parser import parse_answer

# ---------------------------------------------------------------- reply parser

OPTIONS = ["The man", "Not enough information", "The woman"]
ALIASES = [["man"], ["Not enough information"], ["woman"]]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("B", 1),
        ("b", 1),
        ("(B)", 1),
        ("[C]", 2),
        ("C.", 2),
        ("**A**", 0),
        ("Answer: C", 2),
        ("answer: c", 2),
        ("**Answer:** A", 0),
        ("Answer - B", 1),
        ("The answer is (B)", 1),
        ("The answer is A.", 0),
        ("The answer is B because the context says so.", 1),
        ("The correct option is C, the woman.", 2),
        ("Option A", 0),
        ("C) The woman", 2),
        ("A. The man", 0),
        ("B\n\nExplanation: nobody is named.", 1),
        ("I would go with (C).", 2),
        ("The woman", 2),
        ("the man.", 0),
        ("Not enough information", 1),
        ("It cannot be determined from the context.", 1),
        ("I don\u2019t know", 1),
        ("The answer is A woman.", 2),  # "A" is an article here; the wording names the woman
        ("Ｂ", 1),  # full-width letter (NFKC)
        ("The woman was the secretary, not the man.", None),
        ("A or B", None),
        ("Answer: A\nAnswer: B", None),
        ("Sorry, I prefer not to say.", None),
    ],
)
def test_parser_reply_shapes(reply: str, expected: int | None) -> None:
    assert parse_answer(reply, OPTIONS, ALIASES, unknown_index=1).index == expected


@pytest.mark.parametrize(
    "reply",
    [
        None,
        "",
        "   \n\t",
        "None",
        "null",
        "\x00\x01\x02",
        "🙂" * 50,
        "ü" * 100_000,
        "A" * 100_000,
        42,
        b"B",
        "((((",
        "[[]]",
    ],
)
def test_parser_never_raises(reply: object) -> None:
    result = parse_answer(reply, OPTIONS, ALIASES, unknown_index=1)
    assert result.index in (None, 0, 1, 2)
    assert result.parsed == (result.index is not None)
    assert isinstance(result.reason, str) and result.reason
    assert parse_answer(None, OPTIONS).reason == "empty"
