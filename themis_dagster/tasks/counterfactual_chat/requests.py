"""The declared request set: everyday first-person requests and the framings that say who is asking.

A requests file (``requests.yaml``, or a user's own named by ``requests_file``) holds
``framings`` (name -> Jinja2 text that must hold both ``{{ identity }}`` and ``{{ request }}``)
and ``requests`` (each an ``id``, a ``category`` and its ``text``). It is read when the task's
parameters load, so a framing without its placeholder, a request without text or a repeated id
fails before any engine starts, naming the file, the line and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml
from jinja2 import meta

from themis_dagster.errors import ConfigError
from themis_dagster.tasks.rendering import environment, template_sha256

REQUESTS_FILE = Path(__file__).with_name("requests.yaml")
PLACEHOLDERS = ("identity", "request")
REQUEST_FIELDS = ("id", "category", "text")


@dataclass(frozen=True)
class ChatRequest:
    """One everyday request, asked of every counterfactual user."""

    request_id: str
    category: str
    text: str


@dataclass(frozen=True)
class RequestSet:
    framings: dict[str, str]
    requests: tuple[ChatRequest, ...]
    path: Path

    def framing_sha256(self, name: str) -> str:
        return template_sha256(self.framings[name])


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _mapping(node: yaml.Node | None, where: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """A mapping node's entries by key (key node, value node); ``ConfigError`` naming ``where`` otherwise."""
    if not isinstance(node, yaml.MappingNode):
        line = f":{_line(node)}" if node is not None else ""
        raise ConfigError(f"{where}{line}: expected a mapping")
    return {str(key.value): (key, value) for key, value in node.value}


def check_framing(text: Any, where: str) -> str:
    """``text`` when it is a template holding both placeholders; ``ConfigError`` naming ``where`` otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: a framing is a non-empty template")
    try:
        names = meta.find_undeclared_variables(environment().parse(text))
    except jinja2.TemplateSyntaxError as error:
        raise ConfigError(f"{where}: not a template: {error.message}") from error
    missing = [name for name in PLACEHOLDERS if name not in names]
    if missing:
        needed = " and ".join("{{ " + name + " }}" for name in missing)
        raise ConfigError(f"{where}: the framing has no {needed} placeholder")
    return text


def load_request_set(path: Path = REQUESTS_FILE) -> RequestSet:
    """The request set in ``path``, checked (errors name ``path:line: field``)."""
    return _load_request_set(path.resolve())


@cache
def _load_request_set(path: Path) -> RequestSet:
    if not path.is_file():
        raise ConfigError(f"requests file not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not YAML: {error}") from error
    top = _mapping(root, str(path))
    if "framings" not in top or "requests" not in top:
        raise ConfigError(f"{path}: needs 'framings' and 'requests'")
    framings = {}
    for name, (key, value) in _mapping(top["framings"][1], f"{path}: framings").items():
        framings[name] = check_framing(value.value, f"{path}:{_line(key)}: framings.{name}")
    sequence = top["requests"][1]
    if not isinstance(sequence, yaml.SequenceNode) or not sequence.value:
        raise ConfigError(f"{path}:{_line(sequence)}: requests: expected a non-empty list")
    requests: list[ChatRequest] = []
    seen: dict[str, int] = {}
    for index, node in enumerate(sequence.value):
        where = f"{path}:{_line(node)}: requests.{index}"
        entry = {name: value.value for name, (_, value) in _mapping(node, where).items()}
        for name in REQUEST_FIELDS:
            if not isinstance(entry.get(name), str) or not entry[name].strip():
                raise ConfigError(f"{where}.{name}: missing or empty")
        if unknown := sorted(set(entry) - set(REQUEST_FIELDS)):
            raise ConfigError(f"{where}: unknown fields {unknown}; a request has {list(REQUEST_FIELDS)}")
        if entry["id"] in seen:
            raise ConfigError(f"{where}.id: {entry['id']!r} repeats line {seen[entry['id']]}")
        seen[entry["id"]] = _line(node)
        requests.append(ChatRequest(entry["id"], entry["category"], entry["text"].strip()))
    return RequestSet(framings, tuple(requests), path)
