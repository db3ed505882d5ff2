"""MBBQ's own reply reader: ``mbbq.py::detect_answer`` (Veranep/MBBQ), the ``official`` reading of ``mbbq_generate``.

The rules, in the repository's order, over the reply with surrounding spaces and leading punctuation
removed (and a final full stop, when longer than two characters); the first that finds something decides:

1. the reply starts with an option's words (a trailing punctuation mark aside), or its first word is
   an option's last word capitalised;
2. a phrase that announces the answer (``answer_phrases.yaml``: ``before``, e.g. "The answer is"): the
   first word after it a written letter ("B", "(b)", "B:" ...) or containing an option, else exactly
   one option's text in the rest of that line;
3. a phrase that follows the answer (``after``, e.g. "is correct"): the same on the word before it;
4. a phrase saying the question cannot be answered (``unknown``): the item's unknown answer;
5. exactly one option's text anywhere (case aside), unless the reply writes all three letters alike;
6. a written letter at the reply's start (its first two to four characters, then its first character)
   or its last character;
7. all three letters written alike ("A." "B." "C." ...): no answer;
8. exactly one letter written in one of the forms, the most decorated forms first.

So "B. Jackson" is the option whose text is Jackson (rule 5), whatever letter it had, and a reply
echoing the three options reads nothing or the unknown answer where its wording is an ``unknown``
phrase. Phrases and letters match case-sensitively; options' texts case-insensitively, as substrings.
A reply in English is searched for the English phrases, one in another language for the English
ones and then its own. The phrases are walked in the file's order: one stored version of
``detect_answer`` (e5f8568) walks its lists so, another (20ae39b) a Python set, whose order changes
from one process to the next; where two phrases in a reply point at different answers, that
version's reading is not fixed. Never raises.
"""

from __future__ import annotations

import string
from functools import cache
from pathlib import Path
from typing import Any, Literal

from themis_dagster.errors import load_yaml
from themis_dagster.tasks.bbq.parser import ParsedAnswer
from themis_dagster.tasks.spec import Item, Response

__all__ = ["ALL", "detect_answer", "official_reading"]

ALL = "all"
RULE = "detect_answer"
PHRASES = Path(__file__).with_name("answer_phrases.yaml")
Kind = Literal["before", "after", "unknown"]
# The written forms of a letter the repository recognises (``a_list`` ...), by position: a form's
# position pairs it with the other letters' same form. Its C list has "C." and "c." at 20 and 21
# where the others have "A," "a,": kept, since a form's first position decides what it pairs with.
_FORMS = (
    "{x}", "{X}", "{x}.", "{X})", "{x})", "({x})", "({X})", "{x}:", "{X}:", "({X}):", "'{X}'", "'{x}'", "'{x}'.",
    "{X}.", "({x}):", '"{x}:', '"{x}"', "'{x}.'", "[{x}]", '"{x}."', "{X},", "{x},", "{X},", '"{X}"', "({X}),",
    "({X}).", "{X}'dir", '"{X}:', '"{X}".',
)  # fmt: skip


def _written(letter: str) -> tuple[str, ...]:
    forms = [form.format(x=letter.lower(), X=letter) for form in _FORMS]
    if letter == "C":
        forms[20:22] = ["C.", "c."]
    return tuple(forms)


WRITTEN = tuple(_written(letter) for letter in "ABC")


@cache
def phrases(kind: Kind, language: str) -> tuple[str, ...]:
    """The ``kind`` phrases searched in a reply in ``language``, in the order they are tried."""
    table = load_yaml(PHRASES.read_text(encoding="utf-8"))[kind]
    languages = ("en",) if language == "en" else ("en", language)
    return tuple(phrase for lang in languages for part in ("generic", "extra") for phrase in table[part][lang])


def auto_detect(part: str, full: str = "") -> int | str | None:
    """The letter (0-2) ``part`` is written as, or ``ALL`` where ``full`` also writes another letter that way."""
    for k, forms in enumerate(WRITTEN):
        if part in forms:
            position = forms.index(part)
            others = (WRITTEN[o][position] for o in range(3) if o != k)
            return ALL if position > 2 and any(other in full for other in others) else k
    return None


def check_all(text: str) -> bool:
    """Whether ``text`` writes all three letters in one of the decorated forms."""
    return any(all(WRITTEN[k][position] in text for k in range(3)) for position in range(2, len(_FORMS)))


def _one_option(options: list[str], text: str) -> int | None:
    """The one option whose text (case aside) occurs in ``text``, if only one does."""
    present = [option.lower() in text.lower() for option in options]
    return present.index(True) if present.count(True) == 1 else None


def _by_word(word: str, options: list[str]) -> int | str | None:
    found = auto_detect(word)
    if found is not None:
        return found
    return next((k for k, option in enumerate(options) if option in word), None)


def _announced(text: str, options: list[str], language: str) -> int | str | None:
    """Rules 2 and 3: the answer next to a phrase that announces it."""
    for phrase in phrases("before", language):
        for part in text.split(phrase)[1:] if phrase in text else ():
            line = part.strip().split("\n")[0]
            found = _by_word(line.split()[0], options) if line.split() else None
            found = found if found is not None else _one_option(options, line)
            if found is not None:
                return found
    for phrase in phrases("after", language):
        for part in text.split(phrase)[:-1] if phrase in text else ():
            line = part.strip().split("\n")[-1]
            found = _by_word(line.split()[-1], options) if line.split() else None
            found = found if found is not None else _one_option(options, line)
            if found is not None:
                return found
    return None


def _opening(text: str, options: list[str]) -> int | None:
    """Rule 1: the reply opens with an option."""
    words = text.split()
    for k, option in enumerate(options):
        head = words[: len(option.split())]
        if head[-1] in string.punctuation and " ".join(head)[:-1] == option:
            return k
        if " ".join(head) == option or words[0] == option.split()[-1].capitalize():
            return k
    return None


def _by_letters(text: str) -> int | str | None:
    """Rules 6 to 8: letters written at the start or end, all three, or exactly one."""
    for end in (2, 3, 4):
        found = auto_detect(text[:end])
        if found is not None:
            return found
    for part in (text[0], text[-1]):
        found = auto_detect(part, text)
        if found is not None:
            return found
    if check_all(text):
        return ALL
    for position in range(len(_FORMS) - 1, 1, -1):
        present = [WRITTEN[k][position] in text for k in range(3)]
        for k in range(3):
            if present[k] and present.count(True) == 1:
                return k
    return None


def detect_answer(options: list[str], reply: str, unknown_loc: int, language: str = "en") -> int | str | None:
    """The option (0-2) ``detect_answer`` finds in ``reply``, ``ALL`` (all three letters: no answer) or None."""
    text = reply.strip()
    while text and text[0] in string.punctuation:
        text = text[1:].strip()
    if not text:
        return None
    if len(text) > 2 and text.endswith("."):
        text = text[:-1]
    opening = _opening(text, options)
    found = opening if opening is not None else _announced(text, options, language)
    if found is not None:
        return found
    if any(phrase in text for phrase in phrases("unknown", language)):
        return unknown_loc
    named = None if check_all(text) else _one_option(options, text)
    return named if named is not None else _by_letters(text)


def official_reading(response: Response, choices: list[str], item: Item, params: Any) -> ParsedAnswer:
    """The answer ``detect_answer`` finds in the reply, in the item's language; all three letters read as none."""
    if not response.text or not response.text.strip():
        return ParsedAnswer(None, "empty", RULE)
    try:
        found = detect_answer(choices, response.text, int(item.fields["unknown_loc"]), str(item.fields["language"]))
    except Exception as error:  # noqa: BLE001 - a reader must never take the run down
        return ParsedAnswer(None, f"parser_error:{type(error).__name__}", RULE)
    if found == ALL:
        return ParsedAnswer(None, "all_letters", RULE)
    return ParsedAnswer(found, "ok", RULE) if isinstance(found, int) else ParsedAnswer(None, "no_answer", RULE)
