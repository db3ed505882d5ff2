"""A continuation's score read from a completions reply: ``prompt_logprobs`` (token ids) or echoed ``logprobs`` (text).

A reply that lacks the logprobs altogether raises what ``unsupported`` makes of the detail (the
server cannot score); one that has them in an unexpected shape raises ``ValueError``,
``KeyError``, ``TypeError`` or ``IndexError`` (retried as malformed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


class Score(NamedTuple):
    """The summed continuation logprob, whether every continuation token was the greedy pick, the token counts."""

    logprob: float
    is_greedy: bool
    n_prompt_tokens: int
    n_continuation_tokens: int


def move_trailing_spaces(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval moves a context's trailing whitespace to the start of the continuation."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        return context[:-n_spaces], context[-n_spaces:] + continuation
    return context, continuation


def prompt_logprobs_score(
    data: Any, tokens: list[int], context_len: int, unsupported: Callable[[str], Exception]
) -> Score:
    """vLLM's ``prompt_logprobs`` of the tokens sent: the sum over the continuation (from ``context_len`` on)."""
    prompt_logprobs = data["choices"][0].get("prompt_logprobs")
    if prompt_logprobs is None:
        raise unsupported("the response has no prompt_logprobs")
    if len(prompt_logprobs) != len(tokens):
        raise ValueError(f"{len(prompt_logprobs)} prompt logprobs for {len(tokens)} tokens")
    total, greedy = 0.0, True
    for position in range(max(context_len, 1), len(tokens)):
        entry = prompt_logprobs[position][str(tokens[position])]
        total += float(entry["logprob"])
        greedy = greedy and int(entry["rank"]) == 1
    return Score(total, greedy, len(tokens), len(tokens) - context_len)


def echo_score(data: Any, prompt: str, context: str, unsupported: Callable[[str], Exception]) -> Score | str:
    """Echoed logprobs of ``prompt``, split at the context's length by ``text_offset``.

    A string where the continuation cannot be scored (its first token has no logprob).
    """
    logprobs = data["choices"][0].get("logprobs")
    if not logprobs or logprobs.get("text_offset") is None or logprobs.get("token_logprobs") is None:
        raise unsupported("the response has no echoed logprobs with text_offset")
    offsets = logprobs["text_offset"]
    values = logprobs["token_logprobs"]
    tops = logprobs.get("top_logprobs") or [None] * len(values)
    in_prompt = [i for i, offset in enumerate(offsets) if int(offset) < len(prompt)]
    n_context = sum(1 for i in in_prompt if int(offsets[i]) < len(context))
    total, greedy = 0.0, True
    for i in in_prompt[n_context:]:
        if values[i] is None:
            return "the server gave no logprob for the first prompt token (an empty context cannot be scored)"
        total += float(values[i])
        top = tops[i]
        if top:
            greedy = greedy and float(values[i]) >= max(float(v) for v in top.values()) - 1e-6
    return Score(total, greedy, len(in_prompt), len(in_prompt) - n_context)
