"""BBQ's chat prompt: the item's question with its options as letters, shared with EsBBQ/CaBBQ (``esbbq``).

The letters are the reply parser's (``parser.LETTERS``); the template is rendered by the tasks'
one strict Jinja2 environment (``tasks/rendering.py``).
"""

from __future__ import annotations

from typing import Any

from themis_dagster.tasks.bbq.parser import LETTERS
from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.spec import Item, Request


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
        template_sha256=template_sha256(template_text(templates, template)),
        gen_params=gen_params,
    )
