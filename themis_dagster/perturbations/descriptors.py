"""HolisticBias' identity descriptors (Smith et al., 2022), by axis and bucket, for swaps and stated identities.

``descriptors.json`` maps an axis (``race_ethnicity``, ``religion``, ...) to buckets (``black``,
``white``, ...; ``all`` where an axis has none) of descriptors, each a string or an object with
``descriptor`` and optional ``gender`` and ``preference``. Descriptors the dataset marks
``preference: dispreferred`` (slurs and outdated terms it keeps for measurement) are never
offered as an identity or a swap partner here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from themis_dagster.perturbations.pairs import PairList
from themis_dagster.perturbations.sources import Mirror, declared_lists


@dataclass(frozen=True)
class Descriptor:
    text: str
    axis: str
    bucket: str
    preference: str | None = None
    article: str | None = None  # the dataset's own article where the first letter misleads ("a Unitarian")

    def with_article(self) -> str:
        """The descriptor after its indefinite article ("an Asian", "a Unitarian")."""
        article = self.article or ("an" if self.text[:1].lower() in "aeiou" else "a")
        return f"{article} {self.text}"


@dataclass(frozen=True)
class Axes:
    """Every usable descriptor of the file, by axis; ``sha256`` the file's."""

    by_axis: dict[str, tuple[Descriptor, ...]]
    sha256: str
    source: str
    dataset: str = ""

    def axis(self, name: str, field: str) -> tuple[Descriptor, ...]:
        """The axis' descriptors; ``ValueError`` naming ``field`` and the known axes for any other name."""
        if name not in self.by_axis:
            raise ValueError(f"{field}: unknown HolisticBias axis {name!r}; known: {', '.join(sorted(self.by_axis))}")
        return self.by_axis[name]

    def find(self, axis: str, text: str, field: str) -> Descriptor:
        """The descriptor ``text`` (any case) of ``axis``; ``ValueError`` naming ``field`` where it has none."""
        for descriptor in self.axis(axis, field):
            if descriptor.text.lower() == text.lower():
                return descriptor
        raise ValueError(f"{field}: {text!r} is not a descriptor of the {axis!r} axis in {self.source}")

    def bucket(self, axis: str, bucket: str, field: str) -> tuple[Descriptor, ...]:
        """The descriptors of one bucket of ``axis``; ``ValueError`` naming ``field`` and the buckets for any other."""
        found = tuple(d for d in self.axis(axis, field) if d.bucket == bucket)
        if not found:
            buckets = sorted({d.bucket for d in self.axis(axis, field)})
            raise ValueError(f"{field}: the {axis!r} axis has no bucket {bucket!r}; its buckets: {', '.join(buckets)}")
        return found


def _entries(axis: str, buckets: Any) -> list[Descriptor]:
    if isinstance(buckets, list):  # an axis without buckets
        buckets = {"all": buckets}
    found = []
    for bucket, entries in buckets.items():
        for entry in entries:
            if isinstance(entry, str):
                entry = {"descriptor": entry}
            if entry.get("preference") != "dispreferred":
                preference, article = entry.get("preference"), entry.get("article")
                found.append(Descriptor(entry["descriptor"], axis, bucket, preference, article))
    return found


def load_axes(mirror: Mirror) -> Axes:
    """HolisticBias' descriptors as the lists file declares them (v1.1), from the mirror, cache or URL."""
    return _load_axes(mirror)


@cache
def _load_axes(mirror: Mirror) -> Axes:
    source = declared_lists().descriptors
    text, sha256 = mirror.read(source.dataset, source.file)
    data = json.loads(text)
    return Axes(
        {axis: tuple(_entries(axis, buckets)) for axis, buckets in data.items()}, sha256, source.file, source.dataset
    )


def descriptor_pairs(
    axes: Axes, axis: str, pairs: list[tuple[str, str]], classes: tuple[str, str], name: str, field: str
) -> PairList:
    """A list swapping descriptors of one axis: each of ``pairs`` must be two descriptors of ``axis``.

    Errors (``ValueError``): an unknown axis names ``field``; an unknown descriptor or one paired
    twice names ``pairs.<index>``.
    """
    axes.axis(axis, field)
    seen: dict[str, int] = {}
    resolved = []
    for index, (a, b) in enumerate(pairs):
        where = f"pairs.{index}"
        first, second = axes.find(axis, a, where), axes.find(axis, b, where)
        for descriptor in (first, second):
            key = descriptor.text.lower()
            if key in seen:
                raise ValueError(f"{where}: {descriptor.text!r} is already paired in pairs.{seen[key]}")
            seen[key] = index
        resolved.append((first.text, second.text))
    return PairList(name, classes, tuple(resolved), {f"{axes.dataset}/{axes.source}": axes.sha256})
