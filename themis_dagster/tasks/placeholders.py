"""Placeholders no prompt may carry to a model: each template syntax a family fills, looked for in the final text.

Templates are filled three ways: Jinja2 (``tasks/rendering.py``, ``{{ x }}``, strict: an undefined
name already fails there), a family's own markups (LangBiTe's communities ``{GENDER1}``), and masks
(HONEST's ``[M]`` and ``[I]``). A fill that misses one sends the model a prompt with a hole in it
(LangBiTe's Catalan library once sent ``{RELIGIÓ1}``), and the reply is judged as an answer. So the
prompts stage looks for every syntax the family declares (``placeholders`` in its ``family.yaml``)
in the final text of every request, and fails naming the task, the template, the language, the item
and the placeholder. A placeholder's name is a letter followed by letters, digits or underscores, in
any script and with no lower-case letter (``{RELIGIÓ1}``, ``[M]``): prose in braces or brackets
(``[the developer]``, JSON) is not one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

Syntax = Literal["{X}", "[X]", "{{ x }}"]
SYNTAXES: tuple[Syntax, ...] = ("{X}", "[X]", "{{ x }}")
_NAME = r"[^\W\d_]\w*"
PATTERNS: dict[Syntax, re.Pattern[str]] = {
    "{X}": re.compile(r"\{" + _NAME + r"\}"),
    "[X]": re.compile(r"\[" + _NAME + r"\]"),
    # a Jinja2 expression or statement, and a double-braced name closed by a bracket (CBBQ's ``{{NAME2]}``)
    "{{ x }}": re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{\{\s*" + _NAME + r"\s*\]\}", re.DOTALL),
}
# Every syntax at once, in the regex dialect polars shares with Python here: a prefilter over a text column.
ANY = "(?s)" + "|".join(pattern.pattern for pattern in PATTERNS.values())
TEXT_FIELDS = ("prompt", "context", "continuation", "messages")


class UnfilledPlaceholderError(ValueError):
    """A prompt would reach the model with a placeholder left in it; the message says which and where."""


def holes(text: str, syntaxes: Iterable[Syntax] = SYNTAXES) -> list[str]:
    """The unfilled placeholders of these syntaxes in ``text``, in order of appearance."""
    found: list[tuple[int, str]] = []
    for syntax in syntaxes:
        for match in PATTERNS[syntax].finditer(text):
            if syntax == "{{ x }}" or not any(ch.islower() for ch in match.group()):
                found.append((match.start(), match.group()))
    return [hole for _, hole in sorted(found)]


@dataclass(frozen=True)
class Where:
    """Where a request's text comes from: the task, the request's template, the item's language and id."""

    task: str
    template: str | None
    language: str | None
    item_id: str

    def __str__(self) -> str:
        template, language = self.template or "(none)", self.language or "(not declared)"
        return f"task {self.task}, template {template}, language {language}, item {self.item_id}"


def texts_of(row: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """A request row's texts by field (``messages``: each message's content)."""
    for name in TEXT_FIELDS:
        value = row.get(name)
        if name == "messages" and value:
            for k, message in enumerate(value if isinstance(value, list) else []):
                content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
                if isinstance(content, str):
                    yield f"messages[{k}]", content
        elif isinstance(value, str):
            yield name, value


def check_row(row: Mapping[str, Any], where: Where, syntaxes: Iterable[Syntax]) -> None:
    """Raise UnfilledPlaceholderError when one of the request row's texts carries a placeholder of ``syntaxes``."""
    for field, text in texts_of(row):
        left = holes(text, syntaxes)
        if left:
            raise UnfilledPlaceholderError(
                f"{where}: the {field} sent to the model carries the unfilled placeholder {left[0]} "
                f"(all: {sorted(set(left))}): {text[:200]!r}"
            )


def check_prompts(task: str, syntaxes: Iterable[Syntax], prompts: pl.DataFrame, items: pl.DataFrame) -> None:
    """Fail on the first request of a ``prompts`` frame whose text carries a placeholder of ``syntaxes``.

    The text columns are filtered a column at a time first (``ANY``), so a partition without a hole
    costs one regex pass per column; chat messages are decoded and read one request at a time. The
    language is the item's ``language`` field, the template its ``template_id`` field where it has one
    (LangBiTe's library templates), else the request's template.
    """
    chosen = tuple(syntaxes)
    columns = [name for name in TEXT_FIELDS if name in prompts.columns]
    if not chosen or not columns or prompts.is_empty():
        return
    # messages are JSON text, whose escapes (\\u00d3) hide a placeholder from the regex: each is decoded and read
    suspect = prompts.filter(
        pl.any_horizontal(
            [
                pl.col(name).is_not_null() if name == "messages" else pl.col(name).cast(pl.String).str.contains(ANY)
                for name in columns
            ]
        )
    )
    if suspect.is_empty():
        return
    fields = _fields(items, set(suspect["item_id"].to_list()))
    for row in suspect.iter_rows(named=True):
        if isinstance(row.get("messages"), str):
            row["messages"] = json.loads(row["messages"])
        item = fields.get(row["item_id"], {})
        template = item.get("template_id") or row.get("template")
        language = item.get("language")
        where = Where(task, None if template is None else str(template), None if language is None else str(language),
                      str(row["item_id"]))  # fmt: skip
        check_row(row, where, chosen)


def _fields(items: pl.DataFrame, ids: set[str]) -> dict[str, dict[str, Any]]:
    """The ``fields`` of these items, by item id."""
    if "fields" not in items.columns:
        return {}
    found = items.filter(pl.col("item_id").is_in(list(ids))).select("item_id", "fields")
    return {
        item_id: (json.loads(value) if isinstance(value, str) else dict(value or {}))
        for item_id, value in found.iter_rows()
    }
