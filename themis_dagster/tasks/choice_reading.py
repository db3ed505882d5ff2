"""Reading which lettered option a chat reply chose: what a reader found, and the letter rules every lettered
parser applies (BBQ's, WinoBias's, the persona polls').

A parser lists its rules most explicit first (the reply is just a letter, an announced letter, a
bracketed or a leading one), each a pattern of its own benchmark's letters; ``read_letter`` applies
them in order. The first rule that finds a letter decides: one distinct letter is the answer, several
make the reply ``ambiguous``. A reply no rule reads is left to the parser's own next evidence (the
options' words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ChoiceReading:
    """The chosen option's index, or None with ``reason`` saying why; ``how`` names the rule that decided."""

    index: int | None
    reason: str
    how: str = ""

    @property
    def parsed(self) -> bool:
        return self.index is not None


@dataclass(frozen=True)
class LetterRule:
    """One rule of a lettered parser: its name (``how``), its pattern, and whether it reads every match anywhere
    in the reply (``anywhere``) or one match at its start."""

    how: str
    pattern: re.Pattern[str]
    anywhere: bool


def letter_ladder(
    only: re.Pattern[str], announced: re.Pattern[str], bracketed: re.Pattern[str], leading: re.Pattern[str]
) -> tuple[LetterRule, ...]:
    """The rules most lettered parsers apply (WinoBias's, the persona polls'), in this order: the reply is just a
    letter (``letter_only``), announced letters (``announced``), bracketed letters anywhere (``bracketed``), a
    leading enumerated letter (``leading``)."""
    return (
        LetterRule("letter_only", only, anywhere=False),
        LetterRule("announced", announced, anywhere=True),
        LetterRule("bracketed", bracketed, anywhere=True),
        LetterRule("leading", leading, anywhere=False),
    )


def read_letter(text: str, rules: Sequence[LetterRule], letter: Callable[[re.Match[str]], int]) -> ChoiceReading | None:
    """The reading of the first of ``rules`` that finds a letter in ``text`` (``letter``: a match's option index);
    None where none does."""
    for rule in rules:
        if rule.anywhere:
            found = {letter(match) for match in rule.pattern.finditer(text)}
        else:
            found = {letter(match)} if (match := rule.pattern.match(text)) is not None else set()
        if len(found) == 1:
            return ChoiceReading(found.pop(), "ok", rule.how)
        if len(found) > 1:
            return ChoiceReading(None, "ambiguous", rule.how)
    return None
