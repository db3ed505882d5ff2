"""English third-person pronouns swapped by their grammatical role, so a swap can be undone.

A word list cannot swap "her": it is both the object form ("I saw her" -> "I saw him") and the
possessive determiner ("her book" -> "his book"); "his" likewise is a determiner ("his book" ->
"her book") and a pronoun standing alone ("the book is his" -> "the book is hers"). HELM keeps
the first entry of its list for such words (gender_perturbation.py, "instead of making our
decision using a POS tagger for simplicity"): its female-to-male pairs list "her" -> "him"
first, so "his" -> "her" and "him" -> "her" both come back as "him" ("his dog" -> "him dog").
Here the role is read from the next word: a determiner is followed by the word it determines
(a noun or an adjective), the object and the standalone pronoun by punctuation,
the end of the text, or a function word ("to", "the", "and", "very", ...). So

    "his dog"        -> "her dog"        -> "his dog"
    "I told him."    -> "I told her."    -> "I told him."
    "told him the"   -> "told her the"   -> "told him the"
    "it is his."     -> "it is hers."    -> "it is his."

The rule cannot tell a determiner from an object before a bare noun ("gave him flowers" ->
"gave her flowers" -> "gave his flowers"): English leaves that to meaning. docs/counterfactuals.md
says so, and the round-trip tests use sentences whose role the next word shows.
"""

from __future__ import annotations

MALE_TO_FEMALE = {"he": "she", "him": "her", "himself": "herself"}
FEMALE_TO_MALE = {"she": "he", "herself": "himself", "hers": "his"}
"""Pronouns whose partner does not depend on their role (``hers`` only ever pairs with standalone ``his``)."""

PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})

_FUNCTION_WORDS = """
a an the this that these those some any no every each all both either neither another such what which whose
and or but nor so yet for because although though while if unless until since as than then when where whether
to of in on at by with from into onto upon about above below over under after before during through between
among against toward towards without within along across around behind beyond near off out up down away back
is am are was were be been being has have had do does did will would shall should can could may might must
not never also too very really quite just only even still already again ever always often sometimes here there
now today tonight tomorrow yesterday soon later once twice enough much more most less least well how why
i me my mine we us our you your he him his she her it its they them their himself herself itself themselves
who whom whoever whatever something anything nothing everything someone anyone everyone nobody somebody
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())
"""Words that never follow a possessive determiner: after them "her" is the object, "his" stands alone."""


def is_determiner_position(next_word: str | None) -> bool:
    """Whether a pronoun followed by ``next_word`` (None: punctuation or the end) is a possessive determiner."""
    return next_word is not None and next_word.lower() not in FUNCTION_WORDS


def swap_pronoun(word: str, next_word: str | None, to_female: bool, to_male: bool) -> str | None:
    """The partner of the lower-case pronoun ``word`` in the allowed direction(s), or None to leave it.

    ``to_female``: male pronouns become female; ``to_male``: female ones become male; both: a swap.
    """
    determiner = is_determiner_position(next_word)
    if to_female:
        if word == "his":
            return "her" if determiner else "hers"
        if word in MALE_TO_FEMALE:
            return MALE_TO_FEMALE[word]
    if to_male:
        if word == "her":
            return "his" if determiner else "him"
        if word in FEMALE_TO_MALE:
            return FEMALE_TO_MALE[word]
    return None
