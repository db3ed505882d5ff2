"""Where a word-pair list comes from: the declared lists (``lists.yaml``, files of the catalogue) and a user's CSV.

The declared lists are read from the benchmark mirror, the download cache or their canonical URL
(``datasets.resolve_file``), and made a bijection by ``pairs.resolve_pairs``, which keeps what it
left out. A user's CSV is checked strictly instead: an odd column count, an empty side, a
repeated or conflicting word fails naming the file and the line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field, model_validator

from themis_dagster.datasets import resolve_file, sha256_file
from themis_dagster.errors import ConfigError, StrictModel, load_yaml, validated
from themis_dagster.perturbations.pairs import PairList, RawPair, is_word, resolve_pairs
from themis_dagster.perturbations.pronouns import PRONOUNS

LISTS_FILE = Path(__file__).with_name("lists.yaml")


class ListFile(StrictModel):
    """One catalogue file of a list and how it reads (see lists.yaml)."""

    dataset: str
    file: str
    read: Literal["pairs", "columns"]
    columns: tuple[str, str] | None = None
    b_words: tuple[str, ...] = ()
    where: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _orientation(self) -> ListFile:
        if self.read == "pairs" and (self.columns is None) == (not self.b_words):
            raise ValueError("a 'pairs' file names its sides by exactly one of 'columns' or 'b_words'")
        if self.read == "columns" and self.columns is None:
            raise ValueError("a 'columns' file names its class a and class b columns")
        return self


class ListDeclaration(StrictModel):
    description: str
    classes: tuple[str, str]
    pronouns: bool = False
    files: list[ListFile] = Field(min_length=1)


class DescriptorSource(StrictModel):
    dataset: str
    file: str


class GroupsDeclaration(StrictModel):
    """Names in several groups, read from one CSV (see lists.yaml)."""

    description: str
    dataset: str
    file: str
    name: str
    group: str
    align: str | None = None


class ListsFile(StrictModel):
    lists: dict[str, ListDeclaration]
    groups: dict[str, GroupsDeclaration] = Field(default_factory=dict)
    descriptors: DescriptorSource


@cache
def declared_lists(path: Path = LISTS_FILE) -> ListsFile:
    """The declared lists, validated (a bad declaration fails naming the file and the field)."""
    return validated(ListsFile, load_yaml(path.read_text(encoding="utf-8")), str(path))


@dataclass(frozen=True)
class Mirror:
    """Where benchmark files are found (``TaskInputs``' directories) and whether one may be fetched."""

    datasets_dir: Path
    cache_dir: Path
    allow_download: bool = True

    def read(self, dataset: str, name: str) -> tuple[str, str]:
        """The file's text and sha256."""
        found = resolve_file(
            dataset, name, datasets_dir=self.datasets_dir, cache_dir=self.cache_dir, allow_download=self.allow_download
        )
        return found.path.read_text(encoding="utf-8"), found.sha256


Declaration = TypeVar("Declaration")


def _declared(declared: Mapping[str, Declaration], name: str, what: str) -> Declaration:
    """The declaration of ``name`` in lists.yaml; ``KeyError`` listing the declared names for any other."""
    if name not in declared:
        raise KeyError(f"unknown {what} {name!r}; known: {', '.join(sorted(declared))}")
    return declared[name]


def _pair_lines(spec: ListFile, classes: tuple[str, str], text: str) -> list[RawPair]:
    lines = []
    b_words = {word.lower() for word in spec.b_words}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        where = f"{spec.file}:{number}"
        if len(fields) != 2:
            lines.append(RawPair(line.strip(), "", where))  # resolve_pairs drops it: "not a word"
            continue
        first, second = fields
        if spec.columns is not None:
            a, b = (first, second) if spec.columns == classes else (second, first)
        else:
            flags = (first.lower() in b_words, second.lower() in b_words)
            if flags not in ((False, True), (True, False)):
                raise ConfigError(
                    f"{LISTS_FILE}: {spec.file}:{number}: {line.strip()!r} has {sum(flags)} words of 'b_words'; "
                    "a line needs exactly one"
                )
            a, b = (first, second) if flags[1] else (second, first)
        lines.append(RawPair(a, b, where))
    return lines


def _column_lines(spec: ListFile, text: str) -> list[RawPair]:
    assert spec.columns is not None  # checked by ListFile
    lines = []
    for number, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        if any(row.get(column) not in allowed for column, allowed in spec.where.items()):
            continue
        a, b = (row.get(column) or "" for column in spec.columns)
        if a.strip() and b.strip():
            lines.append(RawPair(a.strip(), b.strip(), f"{spec.file}:{number}"))
    return lines


def load_list(name: str, mirror: Mirror) -> PairList:
    """The declared list ``name`` as a bijection (``KeyError`` listing the declared names for any other)."""
    return _load_list(name, mirror)


@cache
def _load_list(name: str, mirror: Mirror) -> PairList:
    declaration = _declared(declared_lists().lists, name, "word list")
    raw: list[RawPair] = []
    hashes: dict[str, str] = {}
    for spec in declaration.files:
        text, sha256 = mirror.read(spec.dataset, spec.file)
        hashes[f"{spec.dataset}/{spec.file}"] = sha256
        lines = _pair_lines(spec, declaration.classes, text) if spec.read == "pairs" else _column_lines(spec, text)
        raw += lines
    if declaration.pronouns:  # the pronoun rules swap these by role (pronouns.py), not by list
        raw = [line for line in raw if line.a.lower() not in PRONOUNS and line.b.lower() not in PRONOUNS]
    pairs, dropped = resolve_pairs(raw)
    return PairList(name, declaration.classes, tuple(pairs), hashes, tuple(dropped), declaration.pronouns)


def read_user_pairs(path: Path, name: str | None = None) -> PairList:
    """A user's word-pair CSV: a header naming the two classes, then one pair a row (or several side by side).

    ``male,female`` / ``actor,actress`` / ``king,queen,kings,queens``: columns come in pairs, the
    header's first two names are the classes (later header pairs must repeat them). Fails with
    ``ConfigError`` naming the file and line for an odd column count, an empty side, a word that is
    no word, a word paired with itself, or a word already paired on an earlier line.
    """
    if not path.is_file():
        raise ConfigError(f"word-pair file not found: {path}")
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    numbered = [(number, [cell.strip() for cell in row]) for number, row in enumerate(rows, start=1) if any(row)]
    if not numbered:
        raise ConfigError(f"{path}: empty; expected a header naming the two classes, then word pairs")
    header_line, header = numbered[0]
    if len(header) % 2 or any(not cell for cell in header):
        raise ConfigError(f"{path}:{header_line}: the header needs two class names per column pair, got {header}")
    classes = (header[0], header[1])
    if classes[0] == classes[1] or any(tuple(header[i : i + 2]) != classes for i in range(0, len(header), 2)):
        raise ConfigError(f"{path}:{header_line}: the header names two different classes, repeated per column pair")
    seen: dict[str, tuple[str, int]] = {}
    pairs: list[tuple[str, str]] = []
    for number, row in numbered[1:]:
        if len(row) % 2:
            raise ConfigError(f"{path}:{number}: {len(row)} columns; word pairs need an even number")
        for start in range(0, len(row), 2):
            a, b = row[start], row[start + 1]
            for column, word in ((start + 1, a), (start + 2, b)):
                if not word:
                    raise ConfigError(f"{path}:{number}: column {column} ({classes[(column - 1) % 2]}) is empty")
                if not is_word(word):
                    raise ConfigError(f"{path}:{number}: column {column}: {word!r} is not a word or phrase")
            if a.lower() == b.lower():
                raise ConfigError(f"{path}:{number}: {a!r} is paired with itself")
            for word in (a, b):
                if word.lower() in seen:
                    other, line = seen[word.lower()]
                    raise ConfigError(f"{path}:{number}: {word!r} is already paired with {other!r} on line {line}")
            seen[a.lower()], seen[b.lower()] = (b, number), (a, number)
            pairs.append((a, b))
    if not pairs:
        raise ConfigError(f"{path}: no word pairs after the header")
    return PairList(name or path.stem, classes, tuple(pairs), {str(path.name): sha256_file(path)})


@dataclass(frozen=True)
class NameGroups:
    """Members of each group, position i of every group sharing the ``align`` value; ``sha256`` the file's."""

    name: str
    groups: dict[str, tuple[str, ...]]
    sha256: str


def load_groups(name: str, mirror: Mirror) -> NameGroups:
    """The declared name groups ``name`` (``KeyError`` listing the declared names for any other).

    Names are title-cased ("ADAM ERICKSON" -> "Adam Erickson"). With ``align``, each group's
    members are interleaved by that column's values in their first-seen order (male, female,
    male, ...), each group cut to the shortest run, so a member position means the same value
    everywhere.
    """
    return _load_groups(name, mirror)


@cache
def _load_groups(name: str, mirror: Mirror) -> NameGroups:
    spec = _declared(declared_lists().groups, name, "name groups")
    text, sha256 = mirror.read(spec.dataset, spec.file)
    runs: dict[str, dict[str, list[str]]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        member = " ".join(part.capitalize() for part in row[spec.name].split())
        runs.setdefault(row[spec.group], {}).setdefault(row[spec.align] if spec.align else "", []).append(member)
    order = list(dict.fromkeys(key for group in runs.values() for key in group))
    length = min(len(group.get(key, [])) for group in runs.values() for key in order)
    groups = {
        group: tuple(values[key][position] for position in range(length) for key in order)
        for group, values in runs.items()
    }
    return NameGroups(name, groups, sha256)
