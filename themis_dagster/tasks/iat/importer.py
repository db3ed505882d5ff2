"""Import IAT word-assignment replies produced elsewhere as a model's raw responses for task ``iat``.

Two CSV layouts are read (detected from the header):

1. The IAT framework's raw results: ``model, temperature, category, dataset, variation,
   iteration, group0, group1, attributes, prompt, response`` (``category``, ``dataset``,
   ``variation`` and ``response`` are required; the others may be absent or empty). Empty
   ``group0``/``group1`` mean "any label of the set" and empty ``attributes`` "every word of
   the set", as the stimulus set defines them. ``attributes`` may be a Python/JSON list
   (``['joyful', 'tragic']``, the reference scripts' format) or a comma/newline separated list.
2. The published GPT-4o replies of the reference repository (``data/result_gpt4o/*.csv``):
   an unnamed index, the reply in column ``0``, ``llm``, ``domain`` (= category), ``category``
   (= dataset, e.g. ``racism``, ``arab``, ``mentalill``) and ``variation``. Those files do not
   keep the offered labels or word order, so every label and word of the set counts.

Either layout may add the model's reasoning (a reasoning model's thinking, kept apart from its
reply): a ``reasoning`` (or ``reasoning_content``) column, stored as the responses' ``reasoning``
(an empty cell: none). As for every import (``importers/replies.py``), the parser never reads it,
a reply with reasoning and no answer is withheld as ``reasoning_unfinished``, and the refusal
detector reads the reply.

Every row of every file is validated before any row is produced; problems raise
``ImportValidationError`` listing ``<file>: row <n>: column <name>: <why>`` (row 1 = the first
data row after the header).
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from themis_dagster.datasets import resolve_file
from themis_dagster.importers import Imported, ImportedReplies, ImportRequest, ImportValidationError
from themis_dagster.importers.replies import REASONING_COLUMNS
from themis_dagster.tasks.iat.stimuli import (
    MAIN_FILE,
    SYNONYM_FILE,
    VARIATIONS,
    StimulusSet,
    Variation,
    canonical_dataset,
    load_stimulus_sets,
)
from themis_dagster.tasks.iat.utils import item_fields
from themis_dagster.tasks.spec import Item, Request, Response

FRAMEWORK_COLUMNS = (
    "model", "temperature", "category", "dataset", "variation", "iteration",
    "group0", "group1", "attributes", "prompt", "response",
)  # fmt: skip
FRAMEWORK_REQUIRED = ("category", "dataset", "variation", "response")
REFERENCE_REQUIRED = ("0", "llm", "domain", "category", "variation")


@dataclass(frozen=True)
class _Row:
    """One validated reply."""

    source: str
    row: int
    stimulus: StimulusSet
    variation: str
    iteration: int | None
    offered: tuple[str, str] | None
    attributes: list[str]
    prompt: str | None
    temperature: float | None
    model: str | None
    text: str
    reasoning: str | None = None


class _Problems(list[str]):
    def add(self, path: Path, row: int | None, column: str | None, why: str) -> None:
        where = f"{path}" + (f": row {row}" if row is not None else "") + (f": column {column!r}" if column else "")
        self.append(f"{where}: {why}")


def _read_csv(path: Path, problems: _Problems) -> pd.DataFrame | None:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as error:
        problems.add(path, None, None, f"cannot read as CSV ({error})")
        return None


def _layout(path: Path, columns: list[str], problems: _Problems) -> str | None:
    present = set(columns)
    if set(REFERENCE_REQUIRED) <= present and "response" not in present:
        return "reference"
    missing = [c for c in FRAMEWORK_REQUIRED if c not in present]
    if not missing:
        return "framework"
    problems.add(
        path,
        None,
        missing[0],
        f"missing column(s) {', '.join(missing)}; expected the framework layout ({', '.join(FRAMEWORK_COLUMNS)}) "
        f"or the published GPT-4o layout ({', '.join(REFERENCE_REQUIRED)})",
    )
    return None


def _attribute_list(raw: str) -> list[str] | None:
    """``"['a', 'b']"``, ``'["a", "b"]'`` or ``"a, b"`` as a list of lower-cased words (None: unreadable)."""
    text = raw.strip()
    if text.startswith("["):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            try:
                value = json.loads(text)
            except ValueError:
                return None
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            return None
        return [v.strip().lower() for v in value if v.strip()]
    return [v.strip().lower() for v in re.split(r"[,;\n]", text) if v.strip()]


def _integer(raw: str) -> int | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return int(value) if value.is_integer() and value >= 0 else None


class _Validator:
    """Checks rows against the stimulus sets, collecting every problem."""

    def __init__(self, sets: Mapping[Variation, Mapping[str, StimulusSet]]) -> None:
        self.sets = sets
        self.problems = _Problems()

    def stimulus(
        self, path: Path, row: int, variation_raw: str, dataset_raw: str, columns: tuple[str, str]
    ) -> tuple[StimulusSet | None, str]:
        variation = variation_raw.strip().lower()
        if variation not in VARIATIONS:
            self.problems.add(
                path, row, columns[0], f"unknown variation {variation_raw!r}; known: {', '.join(VARIATIONS)}"
            )
            return None, variation
        stimulus = self.sets[variation].get(canonical_dataset(dataset_raw))
        if stimulus is None:
            known = ", ".join(self.sets[variation])
            self.problems.add(path, row, columns[1], f"unknown stimulus set {dataset_raw!r}; known: {known}")
        return stimulus, variation

    def offered(self, path: Path, row: int, stimulus: StimulusSet, group0: str, group1: str) -> tuple[str, str] | None:
        first, second = group0.strip().lower(), group1.strip().lower()
        if not first or not second:
            return None
        roles = stimulus.roles()
        bad = False
        for column, label in (("group0", first), ("group1", second)):
            if label not in roles:
                self.problems.add(path, row, column, f"{label!r} is not a group label of set {stimulus.key}")
                bad = True
        if not bad and roles[first] == roles[second]:
            self.problems.add(path, row, "group1", f"both labels are {roles[first]}-group labels of {stimulus.key}")
        return (first, second)

    def attributes(self, path: Path, row: int, stimulus: StimulusSet, raw: str) -> list[str]:
        if not raw.strip():
            return list(stimulus.words)
        words = _attribute_list(raw)
        if words is None:
            self.problems.add(path, row, "attributes", "not a list of words")
            return []
        unknown = [w for w in words if w not in stimulus.valence]
        if unknown:
            self.problems.add(path, row, "attributes", f"not words of set {stimulus.key}: {', '.join(unknown)}")
        duplicated = [w for w, n in Counter(words).items() if n > 1]
        if duplicated:
            self.problems.add(path, row, "attributes", f"repeated words: {', '.join(duplicated)}")
        return words

    def framework_row(self, path: Path, row: int, record: dict[str, str]) -> _Row | None:
        stimulus, variation = self.stimulus(path, row, record["variation"], record["dataset"], ("variation", "dataset"))
        temperature: float | None = None
        if record.get("temperature", "").strip():
            try:
                temperature = float(record["temperature"])
            except ValueError:
                temperature = -1.0
            if not temperature >= 0:
                self.problems.add(path, row, "temperature", f"not a non-negative number: {record['temperature']!r}")
        iteration = None
        if record.get("iteration", "").strip():
            iteration = _integer(record["iteration"])
            if iteration is None:
                self.problems.add(path, row, "iteration", f"not a non-negative integer: {record['iteration']!r}")
        if stimulus is None:
            return None
        offered = self.offered(path, row, stimulus, record.get("group0", ""), record.get("group1", ""))
        attributes = self.attributes(path, row, stimulus, record.get("attributes", ""))
        prompt = record.get("prompt", "") or None
        model = record.get("model", "").strip() or None
        return _Row(
            str(path),
            row,
            stimulus,
            variation,
            iteration,
            offered,
            attributes,
            prompt,
            temperature,
            model,
            record["response"],
        )

    def reference_row(self, path: Path, row: int, record: dict[str, str], index: str | None) -> _Row | None:
        stimulus, variation = self.stimulus(
            path, row, record["variation"], record["category"], ("variation", "category")
        )
        if stimulus is None:
            return None
        iteration = _integer(index) if index else None
        model = record.get("llm", "").strip() or None
        attributes = list(stimulus.words)
        return _Row(str(path), row, stimulus, variation, iteration, None, attributes, None, None, model, record["0"])


def _read_rows(paths: Sequence[Path], validator: _Validator) -> list[_Row]:
    rows: list[_Row] = []
    for path in paths:
        frame = _read_csv(Path(path), validator.problems)
        if frame is None:
            continue
        layout = _layout(Path(path), list(frame.columns), validator.problems)
        if layout is None:
            continue
        if frame.empty:
            validator.problems.add(Path(path), None, None, "no data rows")
            continue
        index_column = next((c for c in frame.columns if c == "" or c.startswith("Unnamed")), None)
        for number, record in enumerate(frame.to_dict("records"), start=1):
            values = {str(k): str(v) for k, v in record.items()}
            if layout == "framework":
                parsed = validator.framework_row(Path(path), number, values)
            else:
                index = values.get(index_column) if index_column else None
                parsed = validator.reference_row(Path(path), number, values, index)
            if parsed is not None:
                reasoning = next((values[name] for name in REASONING_COLUMNS if values.get(name)), None)
                rows.append(replace(parsed, reasoning=reasoning))
    return rows


def _check_one_model(rows: list[_Row], problems: _Problems) -> None:
    models = sorted({row.model for row in rows if row.model})
    if len(models) > 1:
        first = {row.model: row for row in reversed(rows) if row.model}
        where = "; ".join(f"{m!r} first at {first[m].source} row {first[m].row}" for m in models)
        problems.append(f"the files hold replies of {len(models)} models ({where}); import one model at a time")


def _as_rows(rows: list[_Row]) -> ImportedReplies:
    items: list[Item] = []
    requests: list[Request] = []
    responses: list[Response] = []
    counters: Counter[tuple[str, str]] = Counter()
    for row in rows:
        number = counters[(row.variation, row.stimulus.key)]
        counters[(row.variation, row.stimulus.key)] += 1
        identifier = f"{row.variation}:{row.stimulus.key}:{number:04d}"
        fields: dict[str, Any] = item_fields(row.stimulus, row.variation, row.iteration, row.attributes, row.offered)
        fields |= {"source_file": row.source, "source_row": row.row, "source_model": row.model}
        items.append(Item(identifier, row.stimulus.key, fields))
        messages = [{"role": "user", "content": row.prompt}] if row.prompt is not None else None
        gen_params = {"temperature": row.temperature} if row.temperature is not None else None
        requests.append(
            Request(
                request_id=identifier,
                item_id=identifier,
                request_type="chat",
                prompt=row.prompt,
                messages=messages,
                template=None,
                template_sha256=None,
                gen_params=gen_params,
            )
        )
        responses.append(Response(request_id=identifier, item_id=identifier, text=row.text, reasoning=row.reasoning))
    return ImportedReplies(items, requests, responses)


def import_replies(paths: Sequence[Path], files: Mapping[str, Path]) -> ImportedReplies:
    """Validate every row of ``paths`` against the stimulus ``files`` and return the rows to store.

    ``files`` maps ``iat_stimuli.csv`` and ``iat_stimuli_synonym.csv`` to their local paths (as
    ``load_items`` receives them). Raises ImportValidationError, returning nothing, when any
    file, row or column is unusable.
    """
    if not paths:
        raise ImportValidationError(["no import files given"])
    sets = load_stimulus_sets(Path(files[MAIN_FILE]), Path(files[SYNONYM_FILE]))
    validator = _Validator(sets)
    rows = _read_rows(paths, validator)
    _check_one_model(rows, validator.problems)
    if validator.problems:
        raise ImportValidationError(list(validator.problems))
    return _as_rows(rows)


def read(request: ImportRequest) -> Imported:
    """``themis import iat``: the IAT framework's CSVs (or the published GPT-4o replies), stored as ``iat``."""
    settings = request.settings
    files = {
        name: resolve_file("iat", name, datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir)
        for name in (MAIN_FILE, SYNONYM_FILE)
    }
    imported = import_replies(request.paths, {name: f.path for name, f in files.items()})
    return Imported("iat", imported, "+".join(f.sha256 for f in files.values()), "imported")
