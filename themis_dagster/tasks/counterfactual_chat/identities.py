"""Who asks: counterfactual users along one identity axis, in groups whose members stand in for each other.

An identity set is one axis (the metric subset) of two or more groups, from one source:

- ``names``: a declared two-class word list of first names (the IAT's gender names: male, female);
  member i of each group is the list's pair i;
- ``name_groups``: declared names in several groups (Bloomberg's names by race), member i of
  every group sharing the aligning column (the same gender);
- ``descriptors``: HolisticBias descriptors of one axis, each its own group ("a Christian person");
- ``path``: a user's CSV ``group,identity`` (members in file order, aligned by position).

Pairs of groups are the reference group (the first) against each other group, or every pair.
A set with one group compares nothing and fails, naming the field (and the file and line of a
user's CSV), when the task's parameters load.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from themis_dagster.datasets import sha256_file
from themis_dagster.errors import ConfigError, StrictModel
from themis_dagster.perturbations.descriptors import load_axes
from themis_dagster.perturbations.sources import Mirror, load_groups, load_list


class IdentitySet(StrictModel):
    """One axis of counterfactual users (see the module docstring); exactly one source."""

    axis: str = Field(pattern=r"^[a-z0-9_]{1,32}$")
    framing: str = "name"
    names: str | None = None
    name_groups: str | None = None
    descriptors: str | None = None
    groups: tuple[str, ...] | None = None
    path: Path | None = None
    noun: str = "person"
    pairing: Literal["reference", "all"] = "reference"

    @model_validator(mode="after")
    def _one_source(self) -> IdentitySet:
        sources = [name for name in ("names", "name_groups", "descriptors", "path") if getattr(self, name) is not None]
        if len(sources) != 1:
            raise ValueError(f"name exactly one source of names, name_groups, descriptors or path (got {sources})")
        if self.descriptors is not None and self.groups is None:
            raise ValueError("descriptors: name the descriptors to compare in 'groups'")
        if self.groups is not None and len(set(self.groups)) < 2:
            raise ValueError(f"groups: {list(self.groups)} is one group; a counterfactual needs two or more")
        if self.path is not None:
            read_identity_file(self.path)  # a bad file fails with the parameters, naming its line
        return self


@dataclass(frozen=True)
class Identities:
    """An axis' groups (name -> members, aligned by position) and the group pairs compared."""

    axis: str
    framing: str
    groups: dict[str, tuple[str, ...]]
    pairs: tuple[tuple[str, str], ...]
    sha256: str

    def member(self, group: str, position: int) -> str:
        """The member at ``position`` (wrapping round the shortest group), the same position in every group."""
        size = min(len(members) for members in self.groups.values())
        return self.groups[group][position % size]


def read_identity_file(path: Path) -> dict[str, tuple[str, ...]]:
    """A user's CSV of ``group,identity`` rows (a header first); ``ConfigError`` naming the file and line."""
    if not path.is_file():
        raise ConfigError(f"identity file not found: {path}")
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    if not rows or [cell.strip() for cell in rows[0]] != ["group", "identity"]:
        raise ConfigError(f"{path}:1: the header must be 'group,identity'")
    groups: dict[str, list[str]] = {}
    first_line: dict[str, int] = {}
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != 2 or not all(cell.strip() for cell in row):
            raise ConfigError(f"{path}:{number}: expected a group and an identity, got {row}")
        group, identity = (cell.strip() for cell in row)
        first_line.setdefault(group, number)
        groups.setdefault(group, []).append(identity)
    if len(groups) < 2:
        only = ", ".join(f"{group!r} (line {line})" for group, line in first_line.items()) or "none"
        raise ConfigError(f"{path}: one group: {only}; a counterfactual needs two or more")
    return {group: tuple(members) for group, members in groups.items()}


def _pairs(names: list[str], pairing: str) -> tuple[tuple[str, str], ...]:
    if pairing == "all":
        return tuple(combinations(names, 2))
    return tuple((names[0], other) for other in names[1:])


def build_identities(spec: IdentitySet, mirror: Mirror, field: str) -> Identities:
    """The set's groups read from their source; ``ConfigError`` naming ``field`` for an unknown source or group."""
    try:
        groups, sha256 = _groups(spec, mirror)
    except (KeyError, ValueError) as error:
        raise ConfigError(f"{field}: {error.args[0] if error.args else error}") from error
    if spec.groups is not None and spec.descriptors is None:
        unknown = [group for group in spec.groups if group not in groups]
        if unknown:
            raise ConfigError(f"{field}.groups: {unknown} not among {sorted(groups)}")
        groups = {group: groups[group] for group in spec.groups}
    if len(groups) < 2:
        raise ConfigError(f"{field}: one group {sorted(groups)}; a counterfactual needs two or more")
    return Identities(spec.axis, spec.framing, groups, _pairs(list(groups), spec.pairing), sha256)


def _groups(spec: IdentitySet, mirror: Mirror) -> tuple[dict[str, tuple[str, ...]], str]:
    if spec.names is not None:
        pairs = load_list(spec.names, mirror)
        a, b = pairs.classes
        return {a: tuple(x for x, _ in pairs.pairs), b: tuple(y for _, y in pairs.pairs)}, pairs.sha256
    if spec.name_groups is not None:
        named = load_groups(spec.name_groups, mirror)
        return dict(named.groups), named.sha256
    if spec.descriptors is not None:
        assert spec.groups is not None  # checked by IdentitySet
        axes = load_axes(mirror)
        axes.axis(spec.descriptors, "descriptors")
        found = [axes.find(spec.descriptors, text, "groups") for text in spec.groups]
        return {d.text: (f"{d.with_article()} {spec.noun}",) for d in found}, axes.sha256
    assert spec.path is not None  # one source, checked by IdentitySet
    return read_identity_file(spec.path), sha256_file(spec.path)
