"""Bring-your-own-replies importers: turn replies produced elsewhere into a task's stored rows.

An importer is a pure function from files to the ``Item``/``Request``/``Response`` objects the
task itself would produce, so the task's ``judge`` and ``compute_metrics`` score imported
replies exactly like generated ones. It validates every row before returning anything and
raises ``ImportValidationError`` naming the file, row and column of each problem.

Replies in any task's own request layout are read by ``replies.py`` (``themis import <task>``); a
family whose benchmark publishes replies in a format of its own declares an importer for it
(``importer`` in its ``family.yaml``: BBQ's results files, the IAT framework's CSVs), a ``read``
function from ``ImportRequest`` to ``Imported``, run as ``themis import <name>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from themis_dagster.errors import ConfigError
from themis_dagster.settings import Settings
from themis_dagster.tasks.family import ImporterSpec, load_families, resolve
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Item, Request, Response


class ImportValidationError(ValueError):
    """An import file is unusable; the message lists ``file: row N: column C: why`` problems."""

    def __init__(self, problems: list[str], limit: int = 25) -> None:
        self.problems = problems
        shown = problems[:limit]
        more = f"\n... and {len(problems) - limit} more" if len(problems) > limit else ""
        super().__init__(f"{len(problems)} problem(s) in the import:\n" + "\n".join(shown) + more)


@dataclass(frozen=True)
class ImportedReplies:
    """The rows to store for one model, as the task's own functions would have made them."""

    items: list[Item]
    requests: list[Request]
    responses: list[Response]


@dataclass(frozen=True)
class ImportRequest:
    """What ``themis import <name>`` hands an importer: the files, ``--column`` and where things are."""

    paths: Sequence[Path]
    column: str | None
    settings: Settings
    load_task: Callable[[str], LoadedTask]
    """A task as the run loads it (the task overrides applied), for the requests the task itself would make."""


@dataclass(frozen=True)
class Imported:
    """An importer's result: the replies, the task they are stored as, and what the stored rows record."""

    task: str
    replies: ImportedReplies
    dataset_sha256: str
    finish_reason: str


def family_importers() -> dict[str, ImporterSpec]:
    """Every family's importer (``importer`` of its ``family.yaml``), by the name ``themis import`` takes."""
    return {spec.name: spec for family in load_families().values() if (spec := family.spec.importer) is not None}


def run_importer(importer: ImporterSpec, request: ImportRequest) -> Imported:
    """Read the files with a family's importer (its ``read``, imported now)."""
    imported = resolve(importer.read)(request)
    if not isinstance(imported, Imported):
        returned = type(imported).__name__
        raise ConfigError(f"importer {importer.name!r}: {importer.read} returned {returned}, not Imported")
    return imported


__all__ = ["ImportRequest", "ImportValidationError", "Imported", "ImportedReplies", "family_importers", "run_importer"]
