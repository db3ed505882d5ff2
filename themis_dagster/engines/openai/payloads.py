"""Request bodies for the OpenAI-style endpoints, and their replies read into ``Response``s.

Every reader raises ``ValueError``, ``KeyError``, ``TypeError`` or ``IndexError`` on a reply
it cannot read, which the client retries as a malformed response.
"""

from __future__ import annotations

import json
from typing import Any

from themis_dagster.engines.reasoning import with_openai_reasoning
from themis_dagster.exchange import ChatMessage, GenerationParams, Request, Response


def sampling_payload(model: str, params: GenerationParams) -> dict[str, Any]:
    """The sampling fields of a completions or chat request."""
    payload: dict[str, Any] = {
        "model": model,
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
    }
    if params.seed is not None:
        payload["seed"] = params.seed
    if params.stop:
        payload["stop"] = list(params.stop)
    if logit_bias := getattr(params, "logit_bias", None):  # a mitigation's bias (mitigations/engine.py)
        payload["logit_bias"] = {str(token): bias for token, bias in logit_bias.items()}
    return payload


def prompt_logprobs_payload(model: str, tokens: list[int]) -> dict[str, Any]:
    """Score token ids (vLLM): one generated token, the logprob of every prompt token."""
    return {"model": model, "prompt": tokens, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}


def echo_payload(model: str, prompt: str) -> dict[str, Any]:
    """Score a text (legacy completions): the prompt echoed with its tokens' logprobs and offsets."""
    return {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0, "logprobs": 1, "echo": True}


def tokenize_payload(model: str, text: str) -> dict[str, Any]:
    return {"model": model, "prompt": text, "add_special_tokens": False}


def token_ids(data: Any) -> list[int]:
    """The ids of a /tokenize reply."""
    tokens = data["tokens"]
    if not isinstance(tokens, list) or not all(isinstance(token, int) for token in tokens):
        raise TypeError("tokens is not a list of ints")
    return tokens


def concatenated(request: Request) -> str:
    """A conversation as one prompt, for base models (chat_mode 'concat'): the contents joined by newlines."""
    return "\n".join(message["content"] for message in request.messages or [])


def conversation_text(conversation: list[ChatMessage]) -> str:
    """What a chat reply records as its prompt where the server does not return the templated text."""
    return json.dumps(conversation, ensure_ascii=False)


def generated(request: Request, data: Any, text: str, prompt_text: str) -> Response:
    """A completions or chat reply's text, token counts and finish reason as the answer to ``request``."""
    choice = data["choices"][0]
    usage = data.get("usage") or {}
    return request.generated(
        text=text,
        prompt_text=prompt_text,
        n_prompt_tokens=int(usage.get("prompt_tokens") or 0),
        n_output_tokens=int(usage.get("completion_tokens") or 0),
        finish_reason=str(choice.get("finish_reason")),
    )


def completion_reply(request: Request, data: Any, prompt: str) -> Response:
    text = data["choices"][0]["text"]
    if not isinstance(text, str):
        raise TypeError("choices[0].text is not a string")
    return generated(request, data, text, prompt)


def chat_reply(request: Request, data: Any, conversation: list[ChatMessage]) -> Response:
    """A chat reply; its prompt text is the server's (vLLM's ``return_prompt_text``) or the conversation's JSON."""
    text = data["choices"][0]["message"]["content"]
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise TypeError("choices[0].message.content is not a string")
    prompt_text = data.get("prompt_text")
    if not isinstance(prompt_text, str):
        prompt_text = conversation_text(conversation)
    return with_openai_reasoning(generated(request, data, text, prompt_text), data)
