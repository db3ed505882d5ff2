"""Word-pair lists: each word of class ``a`` paired with one word of class ``b``, a bijection.

A swap can only be undone when no word has two partners. The published lists do not promise
that (WinoBias' ``generalized_swaps.txt`` pairs "lady" with both "gentleman" and "lord", "sir"
with both "ma'am" and "miss"), so ``resolve_pairs`` makes one: a pair that its lists state in
both directions wins over a one-way line, then the earlier line wins; every line left out is
kept with the reason (``PairList.dropped``), never silently lost. A user's own list is held to
more: there a conflict is an error naming its file and line (``sources.read_user_pairs``).

Words are compared in lower case; a list's words keep their own spelling (HolisticBias'
"Black", "African-American"), which a swap uses where the text writes a word the list's way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

WORD = re.compile(r"^[^\W\d_]+(?:['’\-. ][^\W\d_]+)*\.?$")
"""One word or a short phrase: letters, joined by apostrophes, hyphens, dots or single spaces, an optional final dot."""


@dataclass(frozen=True)
class RawPair:
    """One line of a list as read: ``a`` (class a) and ``b`` (class b), and where it stood."""

    a: str
    b: str
    where: str  # "file:line"


@dataclass(frozen=True)
class Dropped:
    """A line left out of a list's bijection, and why."""

    a: str
    b: str
    where: str
    reason: str


@dataclass(frozen=True)
class PairList:
    """A bijection between the words of two classes, with its provenance.

    ``classes`` names the two sides (``male``/``female``, ``white``/``black``); ``pairs`` are
    (class a word, class b word) in a stable order; ``files`` maps each source file to its
    sha256; ``pronouns`` says whether the English pronoun rules apply (``swap.py``).
    """

    name: str
    classes: tuple[str, str]
    pairs: tuple[tuple[str, str], ...]
    files: dict[str, str] = field(default_factory=dict)
    dropped: tuple[Dropped, ...] = ()
    pronouns: bool = False

    @property
    def sha256(self) -> str:
        """A hash of what the swap does: the classes, the pairs, the pronoun rules and the files' hashes."""
        payload = {
            "classes": list(self.classes),
            "pairs": [list(pair) for pair in self.pairs],
            "pronouns": self.pronouns,
            "files": dict(sorted(self.files.items())),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def side(self, name: str) -> int:
        """0 for class a, 1 for class b; ``KeyError`` naming both for any other name."""
        if name not in self.classes:
            a, b = self.classes
            raise KeyError(f"{self.name}: no class {name!r}; its classes are {a!r} and {b!r}")
        return self.classes.index(name)


def is_word(text: str) -> bool:
    """Whether ``text`` can be matched as a word or short phrase (no digits, no stray punctuation)."""
    return bool(WORD.match(text))


def resolve_pairs(raw: Iterable[RawPair]) -> tuple[list[tuple[str, str]], list[Dropped]]:
    """The bijection of ``raw`` lines and the lines left out, each with its reason.

    A pair stated in both directions (``a b`` on one line and ``b a`` on another, oriented
    as given by the caller) is *supported* twice; pairs are taken by support, then line
    order, while neither word is taken yet. Lines repeating a taken pair are not reported.
    """
    lines = list(raw)
    support: Counter[tuple[str, str]] = Counter((line.a.lower(), line.b.lower()) for line in lines)
    order = sorted(
        range(len(lines)),
        key=lambda i: (-support[(lines[i].a.lower(), lines[i].b.lower())], i),
    )
    partner: dict[str, tuple[str, str]] = {}  # lower word -> (partner, where it was paired)
    chosen: dict[int, tuple[str, str]] = {}
    dropped: list[Dropped] = []
    for index in order:
        line = lines[index]
        a, b = line.a.lower(), line.b.lower()
        if not is_word(line.a) or not is_word(line.b):
            dropped.append(Dropped(line.a, line.b, line.where, "not a word"))
        elif a == b:
            dropped.append(Dropped(line.a, line.b, line.where, "a word paired with itself"))
        elif partner.get(a, ("",))[0] == b:
            continue  # the same pair again
        elif a in partner or b in partner:
            taken = a if a in partner else b
            other, where = partner[taken]
            dropped.append(Dropped(line.a, line.b, line.where, f"{taken!r} is already paired with {other!r} ({where})"))
        else:
            partner[a] = (b, line.where)
            partner[b] = (a, line.where)
            chosen[index] = (line.a, line.b)
    pairs = [chosen[index] for index in sorted(chosen)]
    dropped.sort(key=lambda entry: _line_order(entry.where))
    return pairs, dropped


def _line_order(where: str) -> tuple[str, int]:
    file, _, line = where.rpartition(":")
    return file, int(line) if line.isdigit() else 0
