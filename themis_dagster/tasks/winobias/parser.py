"""Reads which of two options, (a) or (b), a chat reply chose; never raises, says why when it cannot tell.

Evidence, most explicit first:

1. the reply is just a letter (``b``, ``(B)``, ``a.``, ``**(a)**``);
2. an announced letter (``Answer: (b)``, ``The answer is b.``, ``Option (a)``);
3. bracketed letters ``(a)`` / ``(b)`` anywhere: one distinct letter decides;
4. a leading enumerated letter (``b) the designer``, ``A. the developer``);
5. the option's words: exactly one of the two occupations named as whole words, else the one
   after ``refer(s|ring) to (the)``.

A bare ``a`` is read as a letter only where it cannot be the article (followed by the end of
the reply or punctuation). Two letters at the same level, or both occupations with no
``refers to``, make the reply ``ambiguous``; nothing found is ``no_answer``; an empty reply ``empty``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from themis_dagster.tasks.choice_reading import ChoiceReading, letter_ladder, read_letter

LETTERS = "ab"
MAX_CHARS = 4000
_LETTER = r"(?:\((?P<b>[ab])\)|\[(?P<s>[ab])\]|(?P<l>[ab])(?=\s*$|\s*[.):,;!\]]))"
_ONLY = re.compile(r"^\W*+(?:option|choice|answer)?\W*[\(\[]?(?P<letter>[ab])[\)\]]?\W*$", re.I)
_ANNOUNCED = re.compile(r"\b(?:answer|option|choice)(?:\s+is)?(?:\s+option)?\s*[:\-]?\s*" + _LETTER, re.I)
_BRACKETED = re.compile(r"\((?P<letter>[ab])\)", re.I)
_LEADING = re.compile(r"^\s*(?P<letter>[ab])(?:[\).:]|\s+-\s)", re.I)


ParsedChoice = ChoiceReading
"""The chosen option's index (0 or 1), or None with ``reason`` saying why; ``how`` names the rule."""

_RULES = letter_ladder(_ONLY, _ANNOUNCED, _BRACKETED, _LEADING)


def _letter(found: re.Match[str]) -> int:
    letter = next(value for value in found.groupdict().values() if value)
    return LETTERS.index(letter.lower())


def parse_choice(reply: str | None, options: Sequence[str]) -> ParsedChoice:
    """The option a reply chose among ``options`` (the occupations behind (a) and (b))."""
    text = (reply or "").strip()[:MAX_CHARS].replace("*", "")
    if not text:
        return ParsedChoice(None, "empty")
    if (lettered := read_letter(text, _RULES, _letter)) is not None:
        return lettered
    named = [k for k, option in enumerate(options) if re.search(rf"\b{re.escape(option)}\b", text, re.I)]
    if len(named) == 1:
        return ParsedChoice(named[0], "ok", "option_text")
    if len(named) > 1:
        alternatives = "|".join(re.escape(option) for option in options)
        refers = re.search(rf"\brefer(?:s|ring)?\s+to\s+(?:the\s+)?({alternatives})\b", text, re.I)
        if refers is not None:
            chosen = [k for k, option in enumerate(options) if option.lower() == refers.group(1).lower()]
            return ParsedChoice(chosen[0], "ok", "refers_to")
        return ParsedChoice(None, "ambiguous", "option_text")
    return ParsedChoice(None, "no_answer")
