"""Import replies produced elsewhere for any generation or chat task, as the model's raw responses.

A CSV or JSONL file (``.jsonl`` / ``.ndjson``: one JSON object a line; anything else: CSV with a
header) holds one reply a row: the ``reply`` column (or ``response``) and a key, the first of
these columns the file has:

- ``request_id``: the id the task gives the request (``themis sql`` shows them in ``prompts``);
- ``item_id``: for an item the task asks exactly one request about;
- ``prompt``: the exact text the task would send (a generation prompt, or a chat request's last
  user message), unique among the task's requests.

A file may also hold the model's reasoning, kept apart from its answer as a reasoning model's
server returns it: a ``reasoning`` (or ``reasoning_content``) column, stored as the responses'
``reasoning`` (an empty cell or null: none). The task's parser never reads it: a reply with
reasoning and an empty answer is withheld as ``reasoning_unfinished`` (``evaluation/judging/reply_guard.py``),
and the refusal detector reads the answer, as it does for the engine's replies (docs/refusals.md).

The task's own ``load_items`` and ``build_requests`` (with its configured parameters) make the
items and requests, so ``judge`` and ``compute_metrics`` score imported replies exactly like the
engine's. Items none of whose requests has a reply are left out of the partition; a request of an
imported item without a reply is stored as an error ("no imported reply") and counted as such.

Every row of every file is checked before anything is returned: unknown keys, missing columns,
empty files, rows without a reply and duplicates (the same request twice, in one file or across
files) raise ``ImportValidationError`` naming file, row (1 = the first data row) and column.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from themis_dagster.importers import ImportedReplies, ImportValidationError
from themis_dagster.importers.jsonl import jsonl_objects
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Request, Response

KEY_COLUMNS = ("request_id", "item_id", "prompt")
REPLY_COLUMNS = ("reply", "response")
REASONING_COLUMNS = ("reasoning", "reasoning_content")  # the field names reasoning servers return
IMPORTABLE = ("generate", "chat")
NO_REPLY = "no imported reply"


def prompt_text(request: Request) -> str | None:
    """What a row's ``prompt`` must equal: the generation prompt, or the chat request's last user message."""
    if request.request_type == "generate":
        return request.prompt
    users = [m.get("content") for m in request.messages or [] if m.get("role") == "user"]
    return str(users[-1]) if users else None


def read_rows(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of a CSV or JSONL file; raises ImportValidationError when it cannot be read."""
    if not path.is_file():
        raise ImportValidationError([f"{path}: file not found"])
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        problems: list[str] = []
        rows = [row for _, row in jsonl_objects(path, problems)]
        if problems:
            raise ImportValidationError(problems)
        columns = list(dict.fromkeys(key for row in rows for key in row))
        return columns, rows
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return [], []
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ImportValidationError([f"{path}: not a readable CSV file: {error}"]) from None
    return [str(c) for c in frame.columns], frame.to_dict("records")


class _Index:
    """The task's requests by each key a row may give."""

    def __init__(self, requests: list[Request]) -> None:
        self.by_request = {r.request_id: r for r in requests}
        per_item: dict[str, list[Request]] = {}
        by_prompt: dict[str, list[Request]] = {}
        for request in requests:
            per_item.setdefault(request.item_id, []).append(request)
            text = prompt_text(request)
            if text is not None:
                by_prompt.setdefault(text, []).append(request)
        self.per_item = per_item
        self.by_prompt = by_prompt

    def find(self, key: str, value: str) -> tuple[Request | None, str]:
        """The request a row names, or None and why not."""
        if key == "request_id":
            found = self.by_request.get(value)
            return found, "" if found else f"unknown request id {value!r}"
        if key == "item_id":
            asked = self.per_item.get(value)
            if not asked:
                return None, f"unknown item id {value!r}"
            if len(asked) > 1:
                return None, f"item {value!r} has {len(asked)} requests: give request_id instead"
            return asked[0], ""
        matches = self.by_prompt.get(value, [])
        if not matches:
            return None, f"no request of the task has this exact prompt ({value[:60]!r}...)"
        if len(matches) > 1:
            return None, f"{len(matches)} requests share this prompt: give request_id instead"
        return matches[0], ""


def import_task_replies(task: LoadedTask, dataset_files: dict[str, Path], paths: Sequence[Path]) -> ImportedReplies:
    """The task's items and requests with the files' replies; raises ImportValidationError before anything else."""
    if not paths:
        raise ImportValidationError(["no file given"])
    items = task.module.load_items(dataset_files, task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    kinds = sorted({r.request_type for r in requests} - set(IMPORTABLE))
    if kinds:
        raise ImportValidationError(
            [f"task {task.name}: its requests are {kinds}, not replies; only generation or chat tasks can be imported"]
        )
    index = _Index(requests)
    problems: list[str] = []
    replies: dict[str, str] = {}
    reasoning: dict[str, str] = {}
    where: dict[str, str] = {}
    for path in paths:
        columns, rows = read_rows(path)
        if not rows:
            problems.append(f"{path}: empty file (no rows)")
            continue
        key = next((c for c in KEY_COLUMNS if c in columns), None)
        reply_column = next((c for c in REPLY_COLUMNS if c in columns), None)
        reasoning_column = next((c for c in REASONING_COLUMNS if c in columns), None)
        if key is None:
            problems.append(f"{path}: column request_id, item_id or prompt: missing (columns: {columns})")
        if reply_column is None:
            problems.append(f"{path}: column reply (or response): missing (columns: {columns})")
        if key is None or reply_column is None:
            continue
        for number, row in enumerate(rows, start=1):
            value, reply = row.get(key), row.get(reply_column)
            if value is None or str(value) == "":
                problems.append(f"{path}: row {number}: column {key}: empty")
                continue
            if reply is None:
                problems.append(f"{path}: row {number}: column {reply_column}: missing")
                continue
            request, why = index.find(key, str(value))
            if request is None:
                problems.append(f"{path}: row {number}: column {key}: {why}")
                continue
            if request.request_id in replies:
                problems.append(
                    f"{path}: row {number}: column {key}: duplicate reply for request {request.request_id!r} "
                    f"(first at {where[request.request_id]})"
                )
                continue
            replies[request.request_id] = str(reply)
            where[request.request_id] = f"{path} row {number}"
            thought = row.get(reasoning_column) if reasoning_column else None
            if thought is not None and str(thought) != "":
                reasoning[request.request_id] = str(thought)
    if problems:
        raise ImportValidationError(problems)
    answered_items = {index.by_request[request_id].item_id for request_id in replies}
    kept_items = [item for item in items if item.item_id in answered_items]
    kept_requests = [r for r in requests if r.item_id in answered_items]
    responses = [
        Response(r.request_id, r.item_id, text=replies[r.request_id], reasoning=reasoning.get(r.request_id))
        if r.request_id in replies
        else Response(r.request_id, r.item_id, error=NO_REPLY)
        for r in kept_requests
    ]
    return ImportedReplies(kept_items, kept_requests, responses)
