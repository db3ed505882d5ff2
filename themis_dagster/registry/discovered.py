"""The discovered-models file: models registered automatically (new checkpoints), never by hand.

Same format as ``data/models.yaml`` (``load_registry`` merges the two). Entries are only
ever added: the file is rewritten atomically (temp file + rename) with every existing
entry kept, so a crash mid-write leaves the previous file intact.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from themis_dagster.errors import ConfigError
from themis_dagster.registry.model_id import slugify_model_id, validate_model_id
from themis_dagster.registry.models import LocalSource, ModelSpec, load_models, parse_models

HEADER = (
    "# Models registered automatically by the checkpoint sensor (themis_dagster/sensors/checkpoints.py).\n"
    "# Same format as data/models.yaml; entries are only ever added. Edit data/models.yaml instead.\n"
)
DEFAULT_MAX_MODEL_LEN = 2048
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def load_discovered(path: Path | None) -> dict[str, ModelSpec]:
    """The discovered models by id; a missing file means none yet, a malformed one raises ConfigError."""
    if path is None or not path.is_file():
        return {}
    return load_models(path)


def ids_by_path(models: Mapping[str, ModelSpec]) -> dict[str, str]:
    """Map each local folder (resolved) to its model id, so a folder keeps its id across restarts."""
    found: dict[str, str] = {}
    for spec in models.values():
        if isinstance(spec.source, LocalSource):
            found.setdefault(str(spec.source.path.expanduser().resolve()), spec.id)
    return found


def allocate_model_id(name: str, taken: Iterable[str]) -> str:
    """A valid, unused id for a checkpoint folder called ``name``.

    Policy on a clash (with a declared model, or another checkpoint whose name slugifies
    the same way): append ``-2``, ``-3``, ... to the slug (shortened to stay within 64
    characters). Declarations are never replaced, and the chosen id is kept in the
    discovered file so it stays stable.
    """
    used = set(taken)
    base = slugify_model_id(name)
    if base not in used:
        return base
    counter = 2
    while True:
        suffix = f"-{counter}"
        candidate = validate_model_id(base[: 64 - len(suffix)].rstrip("-._") + suffix)
        if candidate not in used:
            return candidate
        counter += 1


def _has_chat_template(folder: Path) -> bool:
    if any((folder / name).is_file() for name in CHAT_TEMPLATE_FILES):
        return True
    try:
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(tokenizer_config, dict) and bool(tokenizer_config.get("chat_template"))


def checkpoint_spec(model_id: str, folder: Path, config: Mapping[str, Any], fingerprint: str) -> ModelSpec:
    """The registry entry of a Hugging Face checkpoint folder.

    A tokenizer without a chat template means a base model (prompts sent as text); the context
    length is capped by the checkpoint's own ``max_position_embeddings``.
    """
    max_len = DEFAULT_MAX_MODEL_LEN
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and not isinstance(positions, bool) and positions >= 16:
        max_len = min(max_len, positions)
    return ModelSpec(
        id=model_id,
        source=LocalSource(path=folder.expanduser().resolve()),
        max_model_len=max_len,
        chat_template="auto" if _has_chat_template(folder) else None,
        description=f"checkpoint discovered in {folder.parent} (weights sha256 {fingerprint[:12]})",
    )


def _entry(spec: ModelSpec) -> dict[str, Any]:
    """A compact YAML entry: non-default fields, but always the source with its ``kind``."""
    entry: dict[str, Any] = spec.model_dump(mode="json", exclude_defaults=True)
    entry["id"] = spec.id
    entry["source"] = spec.source.model_dump(mode="json")
    if spec.chat_template is None:
        entry["chat_template"] = None
    return {"id": entry.pop("id"), **entry}


def write_discovered(path: Path, models: Sequence[ModelSpec]) -> None:
    """Write the whole file atomically (temp file in the same folder, then rename)."""
    data = {"models": [_entry(spec) for spec in models]}
    parse_models(data, origin=str(path))  # never write what could not be read back
    path.parent.mkdir(parents=True, exist_ok=True)
    text = HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as tmp:
        tmp.write(text)
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, path)


def add_discovered(path: Path, new: Sequence[ModelSpec]) -> dict[str, ModelSpec]:
    """Append ``new`` entries to the file, keeping every existing one; returns the merged registry.

    An id already present for the same folder is left as it is; an id present for another
    folder is an error (ids are allocated against the file before calling this).
    """
    existing = load_discovered(path)
    merged = dict(existing)
    for spec in new:
        old = merged.get(spec.id)
        if old is not None:
            if old.source != spec.source:
                raise ConfigError(f"{path}: id {spec.id!r} is already registered for {old.source}")
            continue
        merged[spec.id] = spec
    if len(merged) != len(existing):
        write_discovered(path, list(merged.values()))
    return merged
