"""A run profile written from the families' sizes: ``python -m themis_dagster.tasks.profile [KIND] PATH``.

``make run`` evaluates every task at the sizes its family declares for it (``sizes: <task>: run:``
in ``tasks/<family>/family.yaml``): small enough that the whole default run stays well under 20
minutes on a small CPU host with the 135M default model. The task files keep the published sizes
(``THEMIS_TASK_OVERRIDES=`` runs those). ``make`` writes the profile to
``data/run_profiles/default.yaml`` before it runs, an ordinary overrides file (``THEMIS_TASK_OVERRIDES``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import get_args

import yaml

from themis_dagster.tasks.family import SizeKind, sizes

HEADER = (
    "# Written by `make` from each family's sizes (sizes: <task>: {kind}: in themis_dagster/tasks/<family>/\n"
    "# family.yaml); change them there. Task files keep the published sizes: THEMIS_TASK_OVERRIDES= (empty)\n"
    "# runs those.\n"
)


def profile_text(kind: SizeKind = "run") -> str:
    """The overrides file of one size kind, every task that declares it in family order."""
    return HEADER.format(kind=kind) + yaml.safe_dump(sizes(kind), sort_keys=False, default_flow_style=None, width=120)


def write_profile(path: Path, kind: SizeKind = "run") -> Path:
    """Write the profile to ``path`` (replaced whole, never half-written)."""
    return replace_text(path, profile_text(kind))


def replace_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole: a reader sees the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return path


def main(argv: list[str]) -> int:
    kinds: tuple[SizeKind, ...] = get_args(SizeKind)
    if len(argv) == 2 and argv[0] in kinds:
        write_profile(Path(argv[1]), argv[0])
    elif len(argv) == 1:
        write_profile(Path(argv[0]))
    else:
        print(f"usage: python -m themis_dagster.tasks.profile [{'|'.join(kinds)}] PATH", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
