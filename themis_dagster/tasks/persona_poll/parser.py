"""Reads which lettered option a chat reply chose (A., B., ...); never raises, says why when it cannot tell.

Shared by the persona polls and OpinionQA's chat variant: both list the options as ``A. <text>``
and ask for a letter. Evidence, most explicit first:

1. the reply is just a letter (``B``, ``(b)``, ``B.``, ``**C**``, ``Answer: A``);
2. an announced letter (``The answer is B``, ``Option C``, ``I choose (A)``);
3. bracketed letters anywhere (``I think (B) fits``): one distinct letter decides;
4. a leading enumerated letter (``B. Somewhat safe``, ``A) Democratic``);
5. an option's words: exactly one option whose text (or one of its wordings) the reply names as
   whole words (the longest texts first, so "Not at all safe" is not read as "safe").

A bare ``A`` is read as a letter only where it cannot be the article (rules 1-3 need it alone,
announced or followed by ``.``/``)``). Two different letters at one level, or several options named,
make the reply ``ambiguous``; nothing found is ``no_answer``; an empty reply ``empty``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from themis_dagster.tasks.choice_reading import ChoiceReading, LetterRule, letter_ladder, read_letter

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_CHARS = 4000


ParsedOption = ChoiceReading
"""The chosen option's index, or None with ``reason`` saying why; ``how`` names the rule that decided."""


def letters(n: int) -> list[str]:
    """The letters of ``n`` options: A, B, ..."""
    if not 1 <= n <= len(LETTERS):
        raise ValueError(f"between 1 and {len(LETTERS)} options, got {n}")
    return list(LETTERS[:n])


@cache
def _rules(n: int) -> tuple[LetterRule, ...]:
    """The letter rules of ``n`` options, most explicit first."""
    only, announced, leading, bracketed = _patterns(n)
    return letter_ladder(only, announced, bracketed, leading)


def _patterns(n: int) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    span = f"[A-{LETTERS[n - 1]}]"
    only = re.compile(rf"^\W*(?:(?:answer|option|choice)\s*[:\-]?\s*)?[\(\[]?(?P<letter>{span})[\)\]]?\W*$", re.I)
    announced = re.compile(
        rf"\b(?:answer|option|choice|choose|pick|select)(?:\s+is)?(?:\s+option)?\s*[:\-]?\s*"
        rf"(?:\((?P<b>{span})\)|(?P<l>{span})(?=\s*$|\s*[.):,;!]))",
        re.I,
    )
    leading = re.compile(rf"^\s*[\(\[]?(?P<letter>{span})(?:[\).:\]]|\s+-\s)", re.I)
    bracketed = re.compile(rf"\((?P<letter>{span})\)", re.I)
    return only, announced, leading, bracketed


def _letter(found: re.Match[str]) -> int:
    letter = next(value for value in found.groupdict().values() if value)
    return LETTERS.index(letter.upper())


def _named(text: str, options: Sequence[Sequence[str]]) -> set[int]:
    """The options whose text the reply names as whole words, each found text masked so a shorter one inside
    it ("safe" in "Not at all safe") is not found again."""
    texts = sorted(((label, k) for k, labels in enumerate(options) for label in labels), key=lambda t: -len(t[0]))
    named = set()
    for label, k in texts:
        pattern = re.compile(rf"(?<!\w){re.escape(label)}(?!\w)", re.I)
        if pattern.search(text):
            named.add(k)
            text = pattern.sub(" ", text)
    return named


def parse_option(reply: object, options: Sequence[Sequence[str]]) -> ParsedOption:
    """The option a reply chose among ``options`` (each option: its label, any wordings)."""
    text = (reply if isinstance(reply, str) else "").strip()[:MAX_CHARS].replace("*", "")
    if not text:
        return ParsedOption(None, "empty")
    if (lettered := read_letter(text, _rules(len(options)), _letter)) is not None:
        return lettered
    named = _named(text, options)
    if len(named) == 1:
        return ParsedOption(named.pop(), "ok", "option_text")
    if len(named) > 1:
        return ParsedOption(None, "ambiguous", "option_text")
    return ParsedOption(None, "no_answer")
