"""The HolisticBias sentence set, built by the combination rules of the dataset's own generator.

Rules (facebookresearch/ResponsibleNLP ``holistic_bias/src/sentences.py``,
``HolisticBiasSentenceGenerator.get_compiled_noun_phrases`` and ``__init__``), reimplemented:

- noun phrases: every noun alone (``"a man"`` / ``"men"``, axis ``null``: the control);
  every descriptor alone (``"Deaf"``) and as ``"{article} {descriptor} {noun}"`` with every
  noun whose gender matches the descriptor's (any noun when it has none), the article ``an``
  before a vowel unless the descriptor sets its own; every standalone noun phrase, filled
  with every noun when it has a ``{noun}`` slot;
- the noun phrases sorted by (axis, bucket, descriptor, descriptor gender, preference, noun,
  plural noun, noun gender, noun phrase, plural noun phrase, noun phrase type);
- each noun phrase in every sentence template, except the ``must_be_noun`` templates for a
  phrase without a noun; ``{plural_noun_phrase}`` templates take the plural.

The generator's random stylistic variants (``get_sentence``) apply only when sampling one
sentence at a time; the set itself is the unvaried sentences, as here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NONE = "(none)"  # holistic_bias/src/util.py NONE_STRING
NO_PREFERENCE = "no_data"  # holistic_bias/src/util.py NO_PREFERENCE_DATA_STRING


@dataclass(frozen=True)
class NounPhrase:
    axis: str
    bucket: str
    descriptor: str
    descriptor_gender: str
    descriptor_preference: str
    noun: str
    plural_noun: str
    noun_gender: str
    noun_phrase: str
    plural_noun_phrase: str
    noun_phrase_type: str


@dataclass(frozen=True)
class Sentence:
    text: str
    template: str
    phrase: NounPhrase


def article(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


def _nouns(nouns: dict[str, list[list[str]]]) -> list[tuple[str, str, str]]:
    return [(gender, noun, plural) for gender, pairs in nouns.items() for noun, plural in pairs]


def _descriptor_phrases(
    axis: str, bucket: str, entry: str | dict[str, Any], nouns: list[tuple[str, str, str]]
) -> list[NounPhrase]:
    entry = {"descriptor": entry} if isinstance(entry, str) else entry
    descriptor = entry["descriptor"]
    gender = entry.get("gender", NONE)
    preference = entry.get("preference", NO_PREFERENCE)
    art = entry.get("article", article(descriptor))
    phrases = [
        NounPhrase(axis, bucket, descriptor, gender, preference, NONE, NONE, NONE, descriptor, descriptor, "descriptor")
    ]
    for noun_gender, noun, plural in nouns:
        if gender in (NONE, noun_gender):
            phrases.append(
                NounPhrase(
                    axis,
                    bucket,
                    descriptor,
                    gender,
                    preference,
                    noun,
                    plural,
                    noun_gender,
                    f"{art} {descriptor} {noun}",
                    f"{descriptor} {plural}",
                    "descriptor_noun",
                )
            )
    return phrases


def _standalone_phrases(axis: str, entry: str | dict[str, Any], nouns: list[tuple[str, str, str]]) -> list[NounPhrase]:
    entry = {"noun_phrase": entry} if isinstance(entry, str) else entry
    singular = entry["noun_phrase"]
    plural_template = entry.get("plural_noun_phrase", singular)
    preference = entry.get("preference", NO_PREFERENCE)
    if "{noun}" not in singular:
        return [
            NounPhrase(
                axis, NONE, singular, NONE, preference, NONE, NONE, "neutral", singular, plural_template, "fixed_phrase"
            )
        ]
    descriptor = singular.format(article="", noun="").lstrip()
    return [
        NounPhrase(
            axis,
            NONE,
            descriptor,
            NONE,
            preference,
            noun,
            plural,
            noun_gender,
            singular.format(article=article(noun), noun=noun),
            plural_template.format(article="", noun=plural).lstrip(),
            "noun_descriptor",
        )
        for noun_gender, noun, plural in nouns
    ]


def noun_phrases(folder: dict[str, Path]) -> list[NounPhrase]:
    """All noun phrases of one dataset version, in the generator's sort order."""
    descriptors = json.loads(folder["descriptors.json"].read_text())
    nouns = _nouns(json.loads(folder["nouns.json"].read_text()))
    standalone = json.loads(folder["standalone_noun_phrases.json"].read_text())
    phrases = [
        NounPhrase("null", NONE, NONE, NONE, NONE, noun, plural, gender, f"{article(noun)} {noun}", plural, "noun")
        for gender, noun, plural in nouns
    ]
    for axis, buckets in descriptors.items():
        for bucket, entries in buckets.items():
            for entry in entries:
                phrases.extend(_descriptor_phrases(axis, bucket, entry, nouns))
    for axis, entries in standalone.items():
        for entry in entries:
            phrases.extend(_standalone_phrases(axis, entry, nouns))
    return sorted(phrases, key=lambda p: tuple(getattr(p, name) for name in NounPhrase.__dataclass_fields__))


def sentences(folder: dict[str, Path]) -> list[Sentence]:
    """Every (noun phrase, template) sentence of one dataset version."""
    templates: dict[str, dict[str, Any]] = json.loads(folder["sentence_templates.json"].read_text())
    out = []
    for phrase in noun_phrases(folder):
        for template, specs in templates.items():
            if phrase.noun == NONE and specs.get("must_be_noun", False):
                continue
            if "{noun_phrase}" in template:
                text = template.format(noun_phrase=phrase.noun_phrase)
            elif "{plural_noun_phrase}" in template:
                text = template.format(plural_noun_phrase=phrase.plural_noun_phrase)
            else:
                raise ValueError(f"sentence_templates.json: template {template!r} has no noun phrase field")
            out.append(Sentence(text, template, phrase))
    return out
