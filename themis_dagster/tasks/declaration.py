"""Reads a task file with its ``include:`` chain merged in, as lm-eval's task files include a base.

A task file may say ``include: <file>`` (a path relative to the including file) and then
declare only what differs; the base may itself include another file. Merging, base first,
each including file over it:

- top-level keys: the including file's value wins (``templates: null`` removes a base's);
- ``params``: the mappings are merged key by key, recursively, so a file can override one
  parameter (or one generation setting) and keep the base's others;
- ``metrics``: the including file's entries come first, in its order, each merged field by
  field over the base's entry of the same ``name`` (so it may restate only a description);
  then the base's entries it does not name, in the base's order. A base's shared trailing
  metrics (GenderBench's undetected rates) so stay last, and declared order is kept.

A file without a ``task:`` key is not a task (an include-only base). Relative paths inside
the merged declaration (``templates``) are read relative to the task file, so a base lives
beside the files that include it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from themis_dagster.errors import ConfigError, load_yaml


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """A YAML file that must hold a mapping (a task declaration or an include-only base)."""
    try:
        raw = load_yaml(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of task fields")
    return raw


@dataclass(frozen=True)
class Declaration:
    """A task file's merged fields and the files they came from (the task file first, then its includes)."""

    fields: dict[str, Any]
    files: tuple[Path, ...]

    @property
    def origin(self) -> str:
        """How errors name the declaration: the task file, and what it includes."""
        included = ", ".join(str(path) for path in self.files[1:])
        return f"{self.files[0]} (including {included})" if included else str(self.files[0])


def read_declaration(path: Path) -> Declaration:
    """The task file's fields with every file it includes merged in (see module docstring)."""
    return _resolve(path, ())


def _resolve(path: Path, chain: tuple[Path, ...]) -> Declaration:
    if path.resolve() in (p.resolve() for p in chain):
        cycle = " -> ".join(str(p) for p in (*chain, path))
        raise ConfigError(f"{chain[-1]}: include: cycle {cycle}")
    raw = read_yaml_mapping(path)
    if "include" not in raw:
        return Declaration(raw, (path,))
    target = raw.pop("include")
    if not isinstance(target, str) or not target:
        raise ConfigError(f"{path}: include: expected the name of a task file, got {target!r}")
    base_path = path.parent / target
    if not base_path.is_file():
        raise ConfigError(f"{path}: include: {target} not found (looked for {base_path})")
    base = _resolve(base_path, (*chain, path))
    return Declaration(merge(base.fields, raw), (path, *base.files))


def merge(base: dict[str, Any], including: dict[str, Any]) -> dict[str, Any]:
    """``including`` over ``base``: its keys win; ``params`` and ``metrics`` merge as documented above."""
    merged = {**base, **including}
    if "params" in base and "params" in including:
        merged["params"] = merge_mappings(base["params"], including["params"])
    if "metrics" in base and "metrics" in including:
        merged["metrics"] = merge_metrics(base["metrics"], including["metrics"])
    return merged


def merge_mappings(base: Any, including: Any) -> Any:
    """Mappings merged key by key, recursively; anything else: ``including`` wins."""
    if not (isinstance(base, dict) and isinstance(including, dict)):
        return including
    merged = dict(base)
    for key, value in including.items():
        merged[key] = merge_mappings(base[key], value) if key in base else value
    return merged


def _name(entry: Any) -> str | None:
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) else None


def merge_metrics(base: Any, including: Any) -> Any:
    """The including file's metric entries (each over the base's namesake), then the base's others."""
    if not (isinstance(base, list) and isinstance(including, list)):
        return including
    by_name = {_name(entry): entry for entry in base if _name(entry) is not None}
    merged = [merge_mappings(by_name[_name(entry)], entry) if _name(entry) in by_name else entry for entry in including]
    named = {_name(entry) for entry in including}
    return merged + [entry for entry in base if _name(entry) is None or _name(entry) not in named]
