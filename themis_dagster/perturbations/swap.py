"""The swap: every listed word of the text replaced by its partner in one pass, its case kept.

One left-to-right pass (a regular expression of every listed word or phrase, longest first,
matched case-insensitively between word boundaries) replaces each occurrence once. HELM
substitutes word after word (``for word, synonym in pairs: text = re.sub(...)``), so with both
directions on, "he" becomes "she" and then "she" becomes "he" again; one pass cannot.

What is kept around a word: a possessive or contraction after it ("man's" -> "woman's",
"he'll" -> "she'll", "actresses'" -> "actors'"), hyphens and punctuation, and the shape of its
case (lower, UPPER, Capitalised, Title-Cased; a word written some other way takes its partner
as the list writes it). So a swap in one direction followed by the swap in the other gives the
text back, for every word whose case is one of those shapes (tests/perturbations/): lower,
UPPER and Capitalised single words; lower, UPPER and Title-Cased phrases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from themis_dagster.perturbations.pairs import PairList
from themis_dagster.perturbations.pronouns import PRONOUNS, swap_pronoun

BOTH = "both"
NEXT_WORD = re.compile(r"[ \t]+([^\W\d_]+)")


@dataclass(frozen=True)
class Swapped:
    """A text after a swap and how many words were replaced (0: the swap left it unchanged)."""

    text: str
    replaced: int


def _capitalized(text: str) -> str:
    for index, char in enumerate(text):
        if char.isalpha():
            return text[:index] + char.upper() + text[index + 1 :].lower()
    return text


def _titled(text: str) -> str:
    """Each part between spaces and hyphens capitalised ("African-American", "Native American", "Ma'am")."""
    return re.sub(r"[^\s\-]+", lambda m: _capitalized(m.group(0)), text)


def shape_of(text: str) -> str:
    """lower, upper, capitalized, title or other (the case a replacement copies)."""
    letters = [char for char in text if char.isalpha()]
    if not letters or text == text.lower():
        return "lower"
    if text == text.upper() and len(letters) > 1:
        return "upper"
    if text == _capitalized(text):
        return "capitalized"
    if text == _titled(text):
        return "title"
    return "other"


def with_shape(word: str, shape: str) -> str:
    """``word`` written in ``shape`` (other: as the list writes it)."""
    if shape == "lower":
        return word.lower()
    if shape == "upper":
        return word.upper()
    if shape == "capitalized":  # a phrase the list title-cases keeps its capitals ("Seattle Center")
        return word if (" " in word or "-" in word) and word == _titled(word) else _capitalized(word)
    if shape == "title":
        return _titled(word)
    return word


class Swapper:
    """Replaces the words of one class by their partners (``direction`` a class name), or both ways (``both``)."""

    def __init__(self, pairs: PairList, direction: str) -> None:
        self.pairs = pairs
        self.direction = direction
        if direction != BOTH:
            pairs.side(direction)  # KeyError naming the classes for any other name
        to_b = direction in (BOTH, pairs.classes[1])
        to_a = direction in (BOTH, pairs.classes[0])
        self._mapping: dict[str, str] = {}
        for a, b in pairs.pairs:
            if to_b:
                self._mapping[a.lower()] = b
            if to_a:
                self._mapping[b.lower()] = a
        self._pronouns = pairs.pronouns
        if self._pronouns:
            male_side = pairs.side("male")
            self._to_female = to_b if male_side == 0 else to_a
            self._to_male = to_a if male_side == 0 else to_b
        words = sorted({*self._mapping, *(PRONOUNS if self._pronouns else ())}, key=lambda w: (-len(w), w))
        alternation = "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in words)
        self._pattern = re.compile(rf"(?<!\w)(?:{alternation})(?!\w)", re.IGNORECASE) if words else None

    def _replace(self, match: re.Match[str]) -> str:
        found = match.group(0)
        key = re.sub(r"\s+", " ", found.lower())
        if self._pronouns and key in PRONOUNS:
            following = NEXT_WORD.match(match.string, match.end())
            partner = swap_pronoun(key, following.group(1) if following else None, self._to_female, self._to_male)
        else:
            partner = self._mapping.get(key)
        if partner is None:
            return found
        return with_shape(partner, shape_of(found))

    def apply(self, text: str) -> Swapped:
        """``text`` with every listed word replaced, and the number replaced."""
        if self._pattern is None or not text:
            return Swapped(text, 0)
        replaced = 0

        def count(match: re.Match[str]) -> str:
            nonlocal replaced
            out = self._replace(match)
            replaced += out != match.group(0)
            return out

        return Swapped(self._pattern.sub(count, text), replaced)
