"""Looking inside a loaded engine: per-token log-probabilities, the next token's top k, the chat template's text.

The ``Engine`` interface (``engines/base.py``) answers whole requests: a loglikelihood is one
summed number. The explorer's playground also shows where that number comes from, so this
module adds three small operations beside the engines instead of changing them:

- :func:`token_logprobs` -- each continuation token's log-probability after the context, its
  rank, and the ``top_k`` tokens the model preferred there (vLLM: ``prompt_logprobs=k`` on the
  same tokens ``VLLMEngine.loglikelihood`` scores, so the tokens add up to its number, up to bf16
  noise between a prompt scored alone and in a batch: about 0.002 nats);
- :func:`next_tokens` -- the ``k`` most likely next tokens after a prompt (vLLM: ``logprobs=k``
  on one generated token, greedy);
- :func:`chat_text` -- the exact text the model sees for a user message (its chat template).

Each engine says how it is looked inside: ``Engine.inspector()`` returns its ``TokenInspector``
(the in-process vLLM engine's in ``engines/vllm/inspection.py``, the fake engine's in
``engines/fake.py``, over HTTP the OpenAI-compatible engine's of ``vllm-server`` and API models in
``engines/openai/inspection.py``); a wrapper (a mitigation, a reasoning budget) gives the wrapped
engine's. What a server cannot give, and any other engine, raise :class:`NotSupportedError` saying so.
"""

from __future__ import annotations

from themis_dagster.engines.base import Engine
from themis_dagster.engines.token_scores import NotSupportedError, ScoredTokens, TokenInspector, TokenScore
from themis_dagster.exchange import ChatMessage

__all__ = [
    "NotSupportedError",
    "ScoredTokens",
    "TokenInspector",
    "TokenScore",
    "chat_text",
    "next_tokens",
    "token_logprobs",
]


def _implementation(engine: Engine) -> TokenInspector:
    """The engine itself where it answers the inspector's questions, else the inspector it declares."""
    if isinstance(engine, TokenInspector):
        return engine
    return engine.inspector()


def token_logprobs(engine: Engine, context: str, continuation: str, top_k: int = 5) -> ScoredTokens:
    """``continuation`` after ``context``, token by token (split as the engine's loglikelihood splits it)."""
    return _implementation(engine).token_logprobs(context, continuation, max(0, min(top_k, 20)))


def next_tokens(engine: Engine, prompt: str, k: int = 10, *, templated: bool = False) -> list[tuple[str, float]]:
    """The ``k`` most likely next tokens after ``prompt``, best first.

    ``templated``: ``prompt`` is a chat template's text (:func:`chat_text`), which writes its own
    special tokens; otherwise it is encoded as ``generate`` encodes a prompt (with them).
    """
    return _implementation(engine).next_tokens(prompt, max(1, min(k, 20)), templated)


def chat_text(engine: Engine, messages: list[ChatMessage]) -> str:
    """The text the model sees for ``messages`` before its reply (chat template, generation prompt added)."""
    return _implementation(engine).chat_text(messages)
