"""Pure rewrites of requests (pre-processing) and replies (post-processing) for one mitigation."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from themis_dagster.exchange import ChatMessage, Request, Response
from themis_dagster.registry.mitigation import InstructionTemplate, ReplyFilter, SystemPrompt

Encode = Callable[[str], list[int]]


def with_system_prompt(request: Request, mitigation: SystemPrompt) -> Request:
    """``request`` as the model sees it under a system prompt (see ``SystemPrompt``)."""
    prefix = mitigation.text + mitigation.separator
    if request.request_type == "chat":
        messages: list[ChatMessage] = [dict(message) for message in request.messages or []]
        if messages and messages[0].get("role") == "system":
            messages[0]["content"] = prefix + messages[0]["content"]
        else:
            messages.insert(0, {"role": "system", "content": mitigation.text})
        return replace(request, messages=messages)
    if request.request_type == "generate":
        return replace(request, prompt=prefix + (request.prompt or ""))
    return replace(request, context=prefix + (request.context or ""))


def with_instruction(request: Request, mitigation: InstructionTemplate) -> Request:
    """``request`` with its user text wrapped by the template; loglikelihoods unchanged."""
    wrap = mitigation.template.replace("{text}", "\x00").split("\x00")
    if request.request_type == "generate":
        return replace(request, prompt=wrap[0] + (request.prompt or "") + wrap[1])
    if request.request_type == "chat":
        messages: list[ChatMessage] = [dict(message) for message in request.messages or []]
        for message in reversed(messages):
            if message.get("role") == "user":
                message["content"] = wrap[0] + message["content"] + wrap[1]
                break
        return replace(request, messages=messages)
    return request


def filtered_reply(response: Response, mitigation: ReplyFilter) -> Response:
    """``response`` with the filter applied to its generated text (scores and errors untouched)."""
    if response.text is None:
        return response
    flags = re.IGNORECASE if mitigation.ignore_case else 0
    return replace(response, text=re.sub(mitigation.pattern, mitigation.replacement, response.text, flags=flags))


def word_token_ids(encode: Encode, word: str) -> set[int]:
    """The token ids a word starts with as the model may write it: bare, after a space, capitalised."""
    forms = {word, " " + word, word.capitalize(), " " + word.capitalize()}
    return {ids[0] for form in forms if (ids := encode(form))}
