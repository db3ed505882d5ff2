"""What produced a result: code version and a JSON-safe record of the configuration."""

from __future__ import annotations

import subprocess
from functools import cache

from themis_dagster import __version__
from themis_dagster.settings import PROJECT_ROOT


def _git(*args: str) -> str:
    """A git command's stripped output in the project's checkout (raises if it fails or takes over 10 s)."""
    command = ["git", "-C", str(PROJECT_ROOT), *args]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=10).stdout.strip()


@cache
def git_commit() -> str:
    """The checkout's commit (with ``+dirty`` for uncommitted changes), or ``unknown``."""
    try:
        commit = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def code_version() -> str:
    return f"{__version__}+{git_commit()}"
