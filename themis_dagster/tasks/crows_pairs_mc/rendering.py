"""Render a THEMIS template for one (pair, order): the context sentence and two numbered choices.

The tasks' one Jinja2 environment (``tasks/rendering.py``) renders as lm-eval's
``utils.apply_template`` does (``StrictUndefined``, ``keep_trailing_newline=True``, no
``trim_blocks``), which is how THEMIS rendered these templates as ``doc_to_text``; a missing
variable fails loudly instead of rendering blank.
"""

from __future__ import annotations

from typing import Literal

from themis_dagster.tasks.rendering import compile_template

Order = Literal["more_first", "less_first"]


def displayed_choices(sent_more: str, sent_less: str, order: Order) -> list[str]:
    """The two sentences in the order the model sees them (position 1 first)."""
    return [sent_more, sent_less] if order == "more_first" else [sent_less, sent_more]


def render(template_text: str, prompt: str, choices: list[str]) -> str:
    """The user message: the template filled with the context and the numbered choices."""
    return compile_template(template_text).render(prompt=prompt, choices=choices)
