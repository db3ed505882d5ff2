"""Real chat replies (``tests/data/chat_replies``): each benchmark's own reader against the project's on them."""

from __future__ import annotations

import json
from pathlib import Path

from themis_dagster.tasks.spec import Item, Response

REPLIES = Path(__file__).resolve().parents[1] / "data" / "chat_replies" / "replies.jsonl"


def replies(task: str) -> tuple[list[Item], list[Response]]:
    """The task's items (as stored, less their context and question) and the model's replies, ``<item_id>:chat``."""
    rows = [json.loads(line) for line in REPLIES.read_text(encoding="utf-8").splitlines()]
    rows = [row for row in rows if row["task"] == task]
    items = [Item(row["item_id"], row["subset"], row["fields"]) for row in rows]
    responses = [
        Response(f"{row['item_id']}:chat", row["item_id"], text=row["reply"], request_type="chat") for row in rows
    ]
    return items, responses


def disagreements(task: str, overrides: dict[str, object] | None = None) -> list[tuple[str, str | None, str | None]]:
    """(item, official, themis) for every reply of ``task`` the two readings read differently (as its judge stores
    them in each judgment's ``detail.readings``)."""
    from themis_dagster.tasks.loader import load_task

    loaded = load_task(task, overrides or {})
    items, responses = replies(task)
    judged = loaded.hooks.judge(items, [], responses, loaded.params)
    read = [(j.item_id, j.detail["readings"]["official"], j.detail["readings"]["themis"]) for j in judged]
    return [row for row in read if row[1] != row[2]]
