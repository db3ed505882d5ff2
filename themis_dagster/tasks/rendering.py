"""Prompt rendering every task family shares: one strict Jinja2 environment, template lookup and digest.

Every task prompt is rendered from Jinja2 text compiled by ``environment()``, configured once:

- ``undefined=StrictUndefined``: a variable the template names but the task does not pass is an
  error naming it, never an empty string in a prompt;
- ``autoescape=False``: prompts are plain text, never HTML;
- ``keep_trailing_newline=True``: a template renders exactly the text it holds, a final newline
  included, as lm-eval renders ``doc_to_text`` (``utils.apply_template``) and as THEMIS rendered its
  CrowS-Pairs templates. Jinja2's default would drop one final newline of the template's source;
  no task template ends with one (tests/tasks/test_rendering.py keeps it so), so either choice renders
  the same prompts, and this one says what a template shows.

Prompts are fingerprinted (each request records its template's ``template_sha256``, and the
request fingerprint that keys the request cache hashes the rendered text), so a change here that
changes one rendered byte invalidates users' caches and changes metrics. The HTML reports
(``themis_dagster/reports``) keep their own autoescaping environments: they render markup, not prompts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

import jinja2

from themis_dagster.exchange import Request


@cache
def environment() -> jinja2.Environment:
    """The one Jinja2 environment of task prompts (see the module docstring for its settings)."""
    return jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - plain-text prompts, never HTML
        keep_trailing_newline=True,
    )


@lru_cache(maxsize=256)
def compile_template(text: str) -> jinja2.Template:
    """``text`` compiled by the prompt environment, once per distinct text."""
    return environment().from_string(text)


def template_text(templates: dict[str, str], name: str) -> str:
    """The text of the task's template ``name``; a KeyError naming the known ones if there is none."""
    if name not in templates:
        raise KeyError(f"template {name!r} not found; known: {', '.join(sorted(templates))}")
    return templates[name]


def render(templates: dict[str, str], name: str, **values: Any) -> str:
    """The task's template ``name`` rendered with ``values``."""
    return compile_template(template_text(templates, name)).render(**values)


def template_sha256(text: str) -> str:
    """The digest each request records for the template it was rendered from."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class TemplatedChat:
    """Chat requests worded by a task's named templates, each recording its template's name and digest.

    Several tasks and second opinions ask this way; one place builds the request they all record.
    ``system``: a system message before each user message (none when empty); ``keep_prompt``: the
    user message is recorded as the request's ``prompt`` too.
    """

    templates: Mapping[str, str]
    gen_params: dict[str, Any]
    system: str | None = None
    keep_prompt: bool = False
    digests: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digests", {name: template_sha256(text) for name, text in self.templates.items()})

    def ask(self, content: str, template: str, *, request_id: str, item_id: str) -> Request:
        """The request sending ``content``, rendered from ``template``."""
        return Request.user_message(
            content,
            request_id=request_id,
            item_id=item_id,
            template=template,
            template_sha256=self.digests[template],
            gen_params=self.gen_params,
            system=self.system,
            prompt=content if self.keep_prompt else None,
        )
