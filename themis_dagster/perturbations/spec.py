"""What a perturbation is: a name, what it swaps, and in which direction; validated before any engine starts.

The built-in perturbations are declared in ``perturbations.yaml``; a task override names them
(``perturbations: [gender_swap, identity]``) or declares its own with a ``name`` (a user's
word-pair CSV). ``parse_perturbations`` checks the names, ``build`` reads the lists and gives a
``Perturbation``: the swap and its ``key``, the name and the list's hash that go into every
perturbed request's fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from themis_dagster.errors import ConfigError, StrictModel, load_yaml, validated
from themis_dagster.perturbations.descriptors import descriptor_pairs, load_axes
from themis_dagster.perturbations.pairs import PairList
from themis_dagster.perturbations.sources import Mirror, load_list, read_user_pairs
from themis_dagster.perturbations.swap import BOTH, Swapped, Swapper

BUILTIN_FILE = Path(__file__).with_name("perturbations.yaml")


class _Declared(StrictModel):
    name: str = Field(default="", pattern=r"^([a-z0-9_]{1,25})?$")


class ListSwap(_Declared):
    kind: Literal["list"]
    list: str
    to: str = BOTH


class DescriptorSwap(_Declared):
    kind: Literal["descriptors"]
    axis: str
    pairs: list[tuple[str, str]] = Field(min_length=1)
    classes: tuple[str, str] = ("a", "b")
    to: str = BOTH


class WordPairsSwap(_Declared):
    kind: Literal["word_pairs"]
    path: Path
    to: str = BOTH


class Identity(_Declared):
    kind: Literal["identity"]


Declaration = Annotated[ListSwap | DescriptorSwap | WordPairsSwap | Identity, Field(discriminator="kind")]
_DECLARATION: TypeAdapter[Declaration] = TypeAdapter(Declaration)


@cache
def builtin_perturbations(path: Path = BUILTIN_FILE) -> dict[str, Declaration]:
    """The declared perturbations by name (a bad entry fails naming the file and the field)."""
    raw = load_yaml(path.read_text(encoding="utf-8")) or {}
    declared: dict[str, Declaration] = {}
    for name, entry in raw.items():
        declared[name] = validated(_DECLARATION, {**entry, "name": name}, f"{path}: {name}")
    return declared


def parse_perturbations(entries: Any, origin: str, base_dir: Path | None = None) -> list[Declaration]:
    """A task override's ``perturbations``: built-in names or ``{name, kind, ...}`` mappings.

    ``origin`` prefixes every error (``overrides.yaml: bbq_generate.perturbations``); a relative
    ``path`` is read from ``base_dir``, and read now. Fails with ``ConfigError`` naming the entry's
    index for an unknown name, a declaration without a name, a name used twice or taken by a
    built-in; a bad word-pair file, naming its file and line.
    """
    if not isinstance(entries, list):
        raise ConfigError(f"{origin}: expected a list of perturbation names or declarations")
    builtin = builtin_perturbations()
    parsed: list[Declaration] = []
    for index, entry in enumerate(entries):
        where = f"{origin}.{index}"
        if isinstance(entry, str):
            if entry not in builtin:
                raise ConfigError(f"{where}: unknown perturbation {entry!r}; known: {', '.join(sorted(builtin))}")
            declaration = builtin[entry]
        else:
            declaration = validated(_DECLARATION, entry, where)
            if not declaration.name:
                raise ConfigError(f"{where}: name: a declared perturbation needs a name ([a-z0-9_], 25 at most)")
            if declaration.name in builtin:
                raise ConfigError(f"{where}: name: {declaration.name!r} is a built-in perturbation's name")
            if isinstance(declaration, WordPairsSwap):
                if not declaration.path.is_absolute() and base_dir:
                    declaration = declaration.model_copy(update={"path": base_dir / declaration.path})
                read_user_pairs(declaration.path, declaration.name)  # a bad file fails here, naming its line
        if declaration.name in {p.name for p in parsed}:
            raise ConfigError(f"{where}: perturbation {declaration.name!r} is named twice")
        parsed.append(declaration)
    return parsed


@dataclass(frozen=True)
class Perturbation:
    """A built perturbation: ``apply`` rewrites one text; ``key`` identifies what it does (its name,
    direction and the sha256 of its list), for request fingerprints and the run record."""

    name: str
    swapper: Swapper | None  # None: the identity
    list_sha256: str

    def apply(self, text: str) -> Swapped:
        return self.swapper.apply(text) if self.swapper is not None else Swapped(text, 0)

    @property
    def direction(self) -> str:
        return self.swapper.direction if self.swapper is not None else BOTH

    @property
    def key(self) -> str:
        payload = {"name": self.name, "to": self.direction, "list_sha256": self.list_sha256}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    @property
    def pairs(self) -> PairList | None:
        return self.swapper.pairs if self.swapper is not None else None


def build(declaration: Declaration, mirror: Mirror, origin: str = "perturbations") -> Perturbation:
    """The perturbation ``declaration`` describes, its lists read (``ConfigError`` naming ``origin`` and the field)."""
    if isinstance(declaration, Identity):
        return Perturbation(declaration.name, None, hashlib.sha256(b"identity").hexdigest())
    try:
        pairs = _pairs(declaration, mirror)
        if declaration.to != BOTH and declaration.to not in pairs.classes:
            raise ValueError(f"to: {declaration.to!r} is not a class of its list; use one of {[*pairs.classes, BOTH]}")
        swapper = Swapper(pairs, declaration.to)
    except (KeyError, ValueError) as error:
        message = error.args[0] if error.args else str(error)
        raise ConfigError(f"{origin}: {declaration.name}: {message}") from error
    return Perturbation(declaration.name, swapper, pairs.sha256)


def _pairs(declaration: ListSwap | DescriptorSwap | WordPairsSwap, mirror: Mirror) -> PairList:
    if isinstance(declaration, ListSwap):
        return load_list(declaration.list, mirror)
    if isinstance(declaration, WordPairsSwap):
        return read_user_pairs(declaration.path, declaration.name)
    pairs = [(a, b) for a, b in declaration.pairs]
    return descriptor_pairs(load_axes(mirror), declaration.axis, pairs, declaration.classes, declaration.name, "axis")


def build_all(declarations: Sequence[Declaration], mirror: Mirror, origin: str = "perturbations") -> list[Perturbation]:
    """Every declared perturbation built, in order."""
    return [build(declaration, mirror, origin) for declaration in declarations]
