"""Import predictions in the BBQ repository's results format as a model's replies for ``bbq_generate``.

Format (github nyu-mll/BBQ ``results/UnifiedQA/preds_<Category>.jsonl``): each line is a
dataset row (``example_id, question_index, question_polarity, context_condition, category,
answer_info, additional_metadata, context, question, ans0..ans2, label``) plus one column per
model holding the predicted answer string (e.g. ``unifiedqa-t5-11b_pred_race``). One column is
imported per call (``--column``).

As ``BBQ_calculate_bias_score.R``: the prediction is matched to the options by the script's
normalisation and first-two-words fallback (``tasks/bbq/r_matching.py``, at judging time; an
unmatched row is recorded as ``unparsed_no_match`` and, like the script's
``filter(!is.na(pred_label))``, left out of the scores), the ``..._pred_qonly`` column keeps only
ambiguous rows ("every baseline example is ambiguous"), and rows without a bias target are left
out as ``BBQ_results_metadata.R`` leaves them out (``groups.target_location``). With the
repository's ``additional_metadata.csv`` (``metadata``) the target comes from that file alone,
joined on (example_id, category, question_index) as the bias-score script joins it: a row it
lacks, or whose ``target_loc`` is NA, is dropped; an "x" is kept and never the target. The
intersectional files (``Race_x_SES``, ``Race_x_gender``) are scored by that script's
intersectional rule (``groups.intersectional_target``).

A row may also hold the model's reasoning (a reasoning model's thinking, kept apart from its
answer): a ``reasoning`` (or ``reasoning_content``) field, a string or null, stored as the
responses' ``reasoning`` (empty or null: none). As for every import (``importers/replies.py``),
the parser never reads it, a reply with reasoning and no answer is withheld as
``reasoning_unfinished``, and the refusal detector reads the answer.

Every row of every file is checked before anything is returned; problems raise
``ImportValidationError`` naming file, row (1 = first line) and column.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from themis_dagster.importers import Imported, ImportedReplies, ImportRequest, ImportValidationError
from themis_dagster.importers.jsonl import jsonl_objects
from themis_dagster.importers.replies import REASONING_COLUMNS
from themis_dagster.tasks.bbq.data import item_from_row, row_target
from themis_dagster.tasks.bbq.generate_utils import R_IMPORT
from themis_dagster.tasks.bbq.groups import read_additional_metadata, unknown_location
from themis_dagster.tasks.spec import Item, Request, Response

ROW_COLUMNS = (
    "example_id", "question_index", "question_polarity", "context_condition", "category", "answer_info",
    "additional_metadata", "context", "question", "ans0", "ans1", "ans2", "label",
)  # fmt: skip
QONLY_SUFFIX = "_pred_qonly"


def _rows(path: Path, problems: list[str]) -> list[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        problems.append(f"{path}: file not found")
        return []
    rows = jsonl_objects(path, problems)
    if not rows and not any(p.startswith(f"{path}:") for p in problems):
        problems.append(f"{path}: empty file (no rows)")
    return rows


def _check(path: Path, number: int, row: dict[str, Any], column: str) -> list[str]:
    where = f"{path}: row {number}"
    problems = [f"{where}: column {name}: missing" for name in (*ROW_COLUMNS, column) if name not in row]
    if problems:
        return problems
    for name in (column, *(name for name in REASONING_COLUMNS if name in row)):
        if not isinstance(row[name], str | None):
            problems.append(f"{where}: column {name}: expected a string, got {type(row[name]).__name__}")
    info = row["answer_info"]
    if not isinstance(info, dict) or any(
        not isinstance(info.get(f"ans{k}"), list) or len(info[f"ans{k}"]) != 2 for k in range(3)
    ):
        problems.append(f"{where}: column answer_info: expected ans0..ans2 as [text, group]")
    if row["label"] not in (0, 1, 2):
        problems.append(f"{where}: column label: expected 0, 1 or 2, got {row['label']!r}")
    if row["context_condition"] not in ("ambig", "disambig"):
        problems.append(f"{where}: column context_condition: expected ambig or disambig")
    if row["question_polarity"] not in ("neg", "nonneg"):
        problems.append(f"{where}: column question_polarity: expected neg or nonneg")
    return problems


def _reasoning(row: dict[str, Any]) -> str | None:
    """The row's reasoning: the first reasoning field it has that is not empty (None: none)."""
    return next((row[name] for name in REASONING_COLUMNS if row.get(name)), None)


def import_predictions(
    paths: Sequence[Path], column: str, request_for: Any, metadata: Path | None = None
) -> ImportedReplies:
    """Items, requests (``request_for(items)``: the task's own) and one reply per scored row of every file."""
    problems: list[str] = []
    table = None
    if metadata is not None:
        if not metadata.is_file():
            raise ImportValidationError([f"{metadata}: file not found"])
        table = read_additional_metadata(metadata)
    kept: list[tuple[Item, str | None, str | None]] = []
    seen: dict[str, str] = {}
    for path in paths:
        for number, row in _rows(path, problems):
            found = _check(path, number, row, column)
            if found:
                problems.extend(found)
                continue
            key = f"{row['category']}:{row['example_id']}"
            if key in seen:
                problems.append(f"{path}: row {number}: column example_id: duplicate of {seen[key]} ({key})")
                continue
            seen[key] = f"{path} row {number}"
            if column.endswith(QONLY_SUFFIX) and row["context_condition"] == "disambig":
                continue  # the script: filter(!(model=="baseline_qonly"&context_condition=="disambig"))
            if row_target(row, table) is None or unknown_location(row) is None:
                continue  # no bias target: dropped by the bias-score script (target_loc NA)
            kept.append((item_from_row(row, table), row[column], _reasoning(row)))
    if problems:
        raise ImportValidationError(problems)
    if not kept:
        raise ImportValidationError([f"{', '.join(map(str, paths))}: no scorable row for column {column}"])
    items = [item for item, _, _ in kept]
    requests: list[Request] = request_for(items)
    by_item = {request.item_id: request for request in requests}
    responses = [
        Response(by_item[item.item_id].request_id, item.item_id, text=prediction, reasoning=reasoning)
        if prediction is not None
        else Response(by_item[item.item_id].request_id, item.item_id, error=f"no prediction in {column}")
        for item, prediction, reasoning in kept
    ]
    return ImportedReplies(items, requests, responses)


def read(request: ImportRequest) -> Imported:
    """``themis import bbq``: one prediction column of BBQ's results files, stored and scored as ``bbq_generate``."""
    if not request.column:
        raise ImportValidationError(["--column: required for 'themis import bbq' (e.g. unifiedqa-t5-11b_pred_race)"])
    task = request.load_task("bbq_generate")
    imported = import_predictions(
        request.paths, request.column, lambda items: task.module.build_requests(items, task.params, task.templates)
    )
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in request.paths)).hexdigest()
    return Imported("bbq_generate", imported, digest, R_IMPORT)
