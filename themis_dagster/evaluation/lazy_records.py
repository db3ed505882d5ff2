"""A chunk's records built only if a task looks at them.

The judgments stage hands ``judge`` a chunk's requests beside its responses; many tasks judge
by the responses alone (crows_pairs never reads its requests), and building a million
``Request`` records nobody reads was a sixth of the stage at 10^6 requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, overload

T = TypeVar("T")


class LazyRecords(Sequence[T]):
    """A read-only list of records, built by ``build`` on first access to any of them or to its length."""

    def __init__(self, build: Callable[[], list[T]]) -> None:
        self._build: Callable[[], list[T]] | None = build
        self._records: list[T] = []

    def _built(self) -> list[T]:
        if self._build is not None:
            self._records, self._build = self._build(), None
        return self._records

    def __len__(self) -> int:
        return len(self._built())

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._built()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self._built())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable, as a list is

    def __add__(self, other: Sequence[Any]) -> list[Any]:
        return [*self, *other]

    def __radd__(self, other: Sequence[Any]) -> list[Any]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"LazyRecords({self._built()!r})"
