"""One checkpoint folder as the checkpoint sensor sees it, before any weights are hashed: a cheap stamp of its
files, and whether it is pending (still being written), broken (with why) or ready.

Pure functions over the folder (``sensors/checkpoints.py`` decides what to do about each). A folder
is ready once it has been quiet for the settle time and has a JSON-object ``config.json``, a
non-empty weights file, every shard its index names, and safetensors headers that parse and cover
their files (``.bin``/``.pt`` pickles are never opened). Hidden folders and names ending in
``.partial``/``.tmp``/``.incomplete`` are not candidates (copies in progress).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from themis_dagster.registry.weights import WEIGHT_SUFFIXES

SKIPPED_SUFFIXES = (".partial", ".tmp", ".incomplete")
SHARD_INDEX = "model.safetensors.index.json"


def checkpoint_folders(root: Path) -> list[Path]:
    """Candidate checkpoint folders: visible sub-folders not named like a temporary copy."""
    if not root.is_dir():
        return []
    return [
        child
        for child in sorted(root.iterdir())
        if child.is_dir() and not child.name.startswith(".") and not child.name.endswith(SKIPPED_SUFFIXES)
    ]


@dataclass(frozen=True)
class Inspection:
    """What one checkpoint folder looks like now (no hashing of weights)."""

    status: Literal["pending", "broken", "ready"]
    reason: str
    stamp: str
    config: dict[str, Any] = field(default_factory=dict)


def _own_file(name: str) -> bool:
    """Files the platform writes into a checkpoint (fingerprint cache, markers) or hidden temp files."""
    return name.startswith(".")


def folder_stamp(folder: Path) -> tuple[str, float]:
    """A cheap digest of the folder's file names, sizes and mtimes, and the newest mtime (seconds)."""
    entries = []
    newest = 0.0
    for child in sorted(folder.iterdir()):
        if _own_file(child.name) or not child.is_file():
            continue
        stat = child.stat()
        entries.append((child.name, stat.st_size, stat.st_mtime_ns))
        newest = max(newest, stat.st_mtime)
    digest = hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:16]
    return digest, newest


def safetensors_problem(path: Path) -> str | None:
    """None if the file's header parses and covers the file (read by the safetensors library), else why."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="np") as handle:  # reads the header only (the rest is mmapped)
            handle.keys()
    except Exception as error:  # noqa: BLE001 - the Rust binding raises its own error type and OSError
        return f"{path.name}: invalid safetensors file ({error})"
    return None


def _config_problem(folder: Path) -> tuple[dict[str, Any], str | None]:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return {}, f"config.json is not valid JSON ({error})"
    if not isinstance(config, dict):
        return {}, "config.json is not a JSON object"
    return config, None


def _shard_problem(folder: Path) -> str | None:
    index = folder / SHARD_INDEX
    if not index.is_file():
        return None
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = set(weight_map.values())
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as error:
        return f"{SHARD_INDEX} is invalid ({error!r})"
    missing = sorted(name for name in shards if not (folder / str(name)).is_file())
    return f"{SHARD_INDEX} names missing shards: {', '.join(missing)}" if missing else None


def inspect_checkpoint(folder: Path, now: float, settle_seconds: float) -> Inspection:
    """Classify a folder as pending (being written), broken (with why) or ready; cheap checks only."""
    try:
        stamp, newest = folder_stamp(folder)
        weights = [
            child
            for child in folder.iterdir()
            if child.suffix in WEIGHT_SUFFIXES and child.is_file() and not _own_file(child.name)
        ]
    except OSError as error:
        return Inspection("pending", f"cannot list folder ({error})", "")
    if now - newest < settle_seconds:
        return Inspection("pending", f"modified {now - newest:.0f} s ago (settle time {settle_seconds:.0f} s)", stamp)
    if not (folder / "config.json").is_file():
        return Inspection("pending", "no config.json yet", stamp)
    if not any(child.stat().st_size > 0 for child in weights):
        return Inspection("pending", "no weights file yet", stamp)
    config, problem = _config_problem(folder)
    problem = problem or _shard_problem(folder)
    for child in sorted(weights):
        if problem is None and child.suffix == ".safetensors":
            problem = safetensors_problem(child)
    if problem is not None:
        return Inspection("broken", problem, stamp)
    return Inspection("ready", "", stamp, config)
