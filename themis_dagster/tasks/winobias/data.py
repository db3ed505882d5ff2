"""WinoBias (Zhao et al., NAACL 2018) sentences as items: the bracketed referent, its pronoun and the other occupation.

Each line of ``{pro,anti}_stereotyped_type{1,2}.txt.{test,dev}`` is ``<n> <sentence>`` with the
antecedent and its coreferent pronoun(s) in square brackets, e.g.
``1 [The developer] argued with the designer because [she] did not like the design.``
A bracketed pronoun (he, she, him, her, his, himself, herself) is a pronoun; the other bracket
is the referent, an occupation of ``male_occupations.txt`` / ``female_occupations.txt`` after its
article (``the``, ``a``, ``an``). The question is about the first bracketed pronoun.

The other occupation is found in the sentence: the one occupation of the two lists, other
than the referent, that occurs in it as whole words (case-insensitive; the longest name first,
so ``construction worker`` is not read as ``worker``). Where the sentence names several (dev
type 2 line 72: "The developer hated [the cleaner] and reported [her] to the manager."), the
one that is the referent of the twin line is taken (lines 2k-1 and 2k use the same two
occupations with the other one as referent); none, or still several, is an error naming the
file and line. On the test files the sentence alone decides every line, and agrees with the
twin line on all but type 2 lines 381-384, where the files' twins are not the same sentences.

Lines ``n`` of the pro- and anti-stereotyped file of a type are (with those few exceptions, e.g.
type 2 test lines 382 and 384) the same sentence with the other pronoun: a ``pair``
(``type1_7``), the unit the pro-anti gap is resampled by.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from themis_dagster.tasks.spec import Item, TaskParams

Stereotype = Literal["pro", "anti"]
STEREOTYPES: tuple[Stereotype, ...] = ("pro", "anti")
PRONOUNS = {"he", "she", "him", "her", "his", "himself", "herself"}
OCCUPATION_FILES = ("male_occupations.txt", "female_occupations.txt")
_LINE = re.compile(r"^(\d+)\s+(.*\S)\s*$")
_BRACKET = re.compile(r"\[([^\]]*)\]")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)


class Params(TaskParams):
    types: list[Literal[1, 2]] = Field(default=[1, 2], min_length=1, description="WinoBias sentence types.")
    stereotypes: list[Stereotype] = Field(
        default=["pro", "anti"], min_length=1, description="Pro- and/or anti-stereotyped sets."
    )
    split: Literal["test", "dev"] = Field(default="test", description="Which files: .txt.test or .txt.dev.")


def file_name(stereotype: str, kind: int, split: str) -> str:
    return f"{stereotype}_stereotyped_type{kind}.txt.{split}"


def read_occupations(files: dict[str, Path]) -> list[str]:
    """The 40 occupations of both lists, longest first."""
    names = {line.strip() for name in OCCUPATION_FILES for line in files[name].read_text().splitlines()}
    return sorted((name for name in names if name), key=lambda name: (-len(name), name))


def parse_line(line: str, occupations: list[str], where: str) -> dict[str, Any]:
    """``{line, sentence, referent, others, pronoun}`` of one line (brackets removed from the sentence).

    ``others``: the occupations other than the referent that the sentence names.
    """
    matched = _LINE.match(line)
    if matched is None:
        raise ValueError(f"{where}: not '<n> <sentence>': {line!r}")
    number, marked = int(matched.group(1)), matched.group(2)
    spans = [span.strip() for span in _BRACKET.findall(marked)]
    pronouns = [span.lower() for span in spans if span.lower() in PRONOUNS]
    referents = [_ARTICLE.sub("", span) for span in spans if span.lower() not in PRONOUNS]
    known = {name.lower(): name for name in occupations}
    if len(referents) != 1 or referents[0].lower() not in known or not pronouns:
        raise ValueError(f"{where}: expected one bracketed occupation and a bracketed pronoun: {line!r}")
    referent = known[referents[0].lower()]
    sentence = re.sub(r"\s+", " ", _BRACKET.sub(lambda m: m.group(1).strip(), marked)).strip()
    others = [
        name
        for name in occupations
        if name != referent and re.search(rf"\b{re.escape(name)}\b", sentence, flags=re.I) is not None
    ]
    return {"line": number, "sentence": sentence, "referent": referent, "others": others, "pronoun": pronouns[0]}


def first_mention(sentence: str, occupation: str) -> int:
    """Where the occupation first occurs in the sentence as whole words."""
    found = re.search(rf"\b{re.escape(occupation)}\b", sentence, flags=re.I)
    return found.start() if found is not None else len(sentence)


def resolve_other(rows: list[dict[str, Any]], name: str) -> None:
    """Set each row's ``other``: its one other occupation, else the one that is its twin line's referent."""
    by_line = {row["line"]: row for row in rows}
    for row in rows:
        others = row.pop("others")
        if len(others) > 1:
            twin = by_line.get(row["line"] + 1 if row["line"] % 2 else row["line"] - 1)
            others = [o for o in others if twin is not None and o == twin["referent"]]
        if len(others) != 1:
            raise ValueError(f"{name} line {row['line']}: cannot tell the other occupation of {row['sentence']!r}")
        row["other"] = others[0]


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """One item per sentence: type 1 before type 2, pro before anti, file order; ``subset`` ``type1_pro`` ...

    The two choices are the occupations in the order they occur in the sentence; ``label`` is
    the referent's index. ``limit`` keeps the first N lines of each file, so pro/anti pairs stay whole.
    """
    occupations = read_occupations(files)
    items = []
    for kind in sorted(params.types):
        for stereotype in STEREOTYPES:
            if stereotype not in params.stereotypes:
                continue
            name = file_name(stereotype, kind, params.split)
            lines = enumerate(files[name].read_text().splitlines(), start=1)
            rows = [parse_line(line, occupations, f"{name} line {index}") for index, line in lines if line.strip()]
            resolve_other(rows, name)
            for row in rows[: params.limit]:
                choices = sorted([row["referent"], row["other"]], key=lambda o: first_mention(row["sentence"], o))
                subset = f"type{kind}_{stereotype}"
                fields = row | {
                    "type": kind,
                    "stereotype": stereotype,
                    "choices": choices,
                    "label": choices.index(str(row["referent"])),
                    "pair": f"type{kind}_{row['line']}",
                }
                items.append(Item(item_id=f"{subset}_{row['line']}", subset=subset, fields=fields))
    return items
