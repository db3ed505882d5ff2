"""OpinionQA's survey files as the dataset mirror keeps them (tatsu-lab/opinions_qa at ed8c4e0, ``data/human_resp/``).

- ``American_Trends_Panel_W<k>/info.csv``: one row per question: ``key`` (``<QUESTION>_W<k>``),
  ``question``, ``references`` (the options in order, "Refused" and other non-ordinal answers
  last, a Python list literal) and ``option_ordinal`` (the ordinal options' positions);
- ``American_Trends_Panel_W<k>/<ATTR>_data.json``: per question key, per group of the attribute,
  the count of each answer. The counts are whole numbers (respondents as the files give them; the
  paper weighted each respondent by ``WEIGHT_W<k>`` from ``responses.csv``, which the mirror
  lacks). They exist for 684 of the 1,506 questions;
- ``Pew_American_Trends_Panel_disagreement_500/info.csv`` (the 500 most contentious questions,
  the paper's steering set; 179 of them have group counts) and its ``metadata.csv`` (each
  attribute's groups, in the survey's order);
- ``topic_mapping.npy``: a pickled dict, question text with its options -> coarse topics
  (``cg``), read by a loader that admits only NumPy's array reconstruction, never arbitrary code.

The whole population (the paper's "Overall", from every respondent) is the sum of one attribute's
groups: census region (``CREGION``), known for every panelist (its totals are the largest of every
attribute on every question, equal to ``RACE``'s; tests check it on the mirror).
"""

from __future__ import annotations

import ast
import csv
import json
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

WAVES = (26, 27, 29, 32, 34, 36, 41, 42, 43, 45, 49, 50, 54, 82, 92)
Attribute = Literal["CREGION", "AGE", "SEX", "EDUCATION", "INCOME", "POLIDEOLOGY", "POLPARTY", "RACE"]
ATTRIBUTES: tuple[Attribute, ...] = get_args(Attribute)
OVERALL = "Overall"
WHOLE_POPULATION_ATTRIBUTE = "CREGION"
DISAGREEMENT = "Pew_American_Trends_Panel_disagreement_500"
METADATA = f"{DISAGREEMENT}/metadata.csv"
TOPICS = "topic_mapping.npy"
_NOT_GROUPS = ("MC_options", "question_text")


def wave_folder(wave: int) -> str:
    return f"American_Trends_Panel_W{wave}"


def info_file(wave: int) -> str:
    return f"{wave_folder(wave)}/info.csv"


def counts_file(wave: int, attribute: str) -> str:
    return f"{wave_folder(wave)}/{attribute}_data.json"


def file_names() -> list[str]:
    """Every mirror file the tasks read (the task files' ``files``), in this order."""
    names = [f"{DISAGREEMENT}/info.csv", METADATA, TOPICS]
    for wave in WAVES:
        names += [info_file(wave), *(counts_file(wave, attribute) for attribute in ATTRIBUTES)]
    return names


def group_key(attribute: str, group: str) -> str:
    """How a group is named in subsets and item fields: ``POLPARTY=Democrat``."""
    return f"{attribute}={group}"


@dataclass(frozen=True)
class Question:
    """One survey question: its key, wave, text, options (non-ordinal ones last) and the ordinal positions."""

    key: str
    wave: int
    text: str
    options: tuple[str, ...]
    ordinal: tuple[float, ...]

    @property
    def topic_key(self) -> str:
        """The question as ``topic_mapping.npy`` keys it: its text and options (``helpers.py``'s ``question``)."""
        return f"{self.text} [{'/'.join(self.options)}]"


def _literal(text: str, where: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"{where}: not a Python literal: {text[:80]!r}") from None


@cache
def read_questions(path: Path, wave: int) -> dict[str, Question]:
    """A wave's ``info.csv``: its questions by key, in file order."""
    questions = {}
    with path.open(newline="", encoding="utf-8") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            where = f"{path}: line {line}"
            options = tuple(str(option) for option in _literal(row["references"], f"{where}: references"))
            ordinal = tuple(float(value) for value in _literal(row["option_ordinal"], f"{where}: option_ordinal"))
            if not 2 <= len(ordinal) <= len(options):
                raise ValueError(f"{where}: {len(ordinal)} ordinal positions for options {options}")
            questions[row["key"]] = Question(row["key"], wave, row["question"], options, ordinal)
    return questions


@cache
def read_counts(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """An ``<ATTR>_data.json``: question key -> group -> answer -> count."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {
        key: {group: dict(counts) for group, counts in entry.items() if group not in _NOT_GROUPS}
        for key, entry in raw.items()
    }


@cache
def read_groups(path: Path) -> dict[str, tuple[str, ...]]:
    """``metadata.csv``: each attribute's groups in the survey's order (the attributes the mirror has counts for)."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = {row["key"]: row["options"] for row in csv.DictReader(handle)}
    missing = [attribute for attribute in ATTRIBUTES if attribute not in rows]
    if missing:
        raise ValueError(f"{path}: no groups for {missing}")
    return {attribute: tuple(_literal(rows[attribute], f"{path}: {attribute}")) for attribute in ATTRIBUTES}


@cache
def read_disagreement(path: Path) -> tuple[str, ...]:
    """The keys of the paper's 500 most contentious questions (its steering set)."""
    with path.open(newline="", encoding="utf-8") as handle:
        return tuple(row["key"] for row in csv.DictReader(handle))


class _ArraysOnly(pickle.Unpickler):
    """Unpickles what ``np.save`` writes for an object array (a dict of lists of str) and nothing else."""

    ALLOWED = frozenset(
        {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
         ("numpy", "dtype")}
    )  # fmt: skip

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a topic mapping")
        return super().find_class(module, name)


@cache
def read_topics(path: Path) -> dict[str, tuple[str, ...]]:
    """``topic_mapping.npy``: question (text and options) -> its coarse topics."""
    with path.open("rb") as handle:
        magic, major = handle.read(6), handle.read(2)[0]
        if magic != b"\x93NUMPY" or major not in (1, 2):
            raise ValueError(f"{path}: not a .npy file of format version 1 or 2")
        size = 2 if major == 1 else 4  # the header's length, little-endian, then the header (NumPy's format spec)
        handle.read(int.from_bytes(handle.read(size), "little"))
        array = _ArraysOnly(handle).load()
    mapping: Mapping[str, Mapping[str, list[str]]] = array.item()
    return {str(question): tuple(str(topic) for topic in entry.get("cg", ())) for question, entry in mapping.items()}


def whole_population(counts: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The answer counts of every respondent: the sum over one attribute's groups (module docstring)."""
    total: dict[str, float] = {}
    for answers in counts.values():
        for answer, count in answers.items():
            total[answer] = total.get(answer, 0.0) + float(count)
    return total
