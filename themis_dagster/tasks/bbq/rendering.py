"""Renders the task's Jinja2 templates (strict: a missing variable is an error, not an empty string)."""

from __future__ import annotations

import hashlib
from typing import Any

import jinja2

from themis_dagster.tasks.bbq.parser import LETTERS
from themis_dagster.tasks.spec import Item, Request

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)  # noqa: S701 - plain text prompts


def template_text(templates: dict[str, str], name: str) -> str:
    if name not in templates:
        raise KeyError(f"template {name!r} not found; known: {', '.join(sorted(templates))}")
    return templates[name]


def render(templates: dict[str, str], name: str, **values: Any) -> str:
    return _ENV.from_string(template_text(templates, name)).render(**values)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def lettered_chat_request(
    item: Item, templates: dict[str, str], template: str, options: list[str], gen_params: dict[str, Any]
) -> Request:
    """One chat request ``<item_id>:chat`` asking the item's question with its options as letters A, B, C."""
    content = render(
        templates,
        template,
        context=item.fields["context"],
        question=item.fields["question"],
        options=list(zip(LETTERS, options, strict=True)),
    )
    return Request.user_message(
        content,
        request_id=f"{item.item_id}:chat",
        item_id=item.item_id,
        template=template,
        template_sha256=sha256(template_text(templates, template)),
        gen_params=gen_params,
    )
