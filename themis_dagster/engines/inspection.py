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

Implemented for the in-process vLLM engine (``VLLMEngine``), the fake engine and, over HTTP, the
OpenAI-compatible engine of ``vllm-server`` and API models (``engines/openai/inspection.py``); what a
server cannot give, and any other engine, raise :class:`NotSupportedError` saying so. When the
engines are split further, each of these belongs on the engine as a method (an engine that
can answer them implements ``TokenInspector``); callers would not change.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Protocol, runtime_checkable

from themis_dagster.engines.base import Engine
from themis_dagster.engines.token_scores import NotSupportedError, ScoredTokens, TokenScore
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


@runtime_checkable
class TokenInspector(Protocol):
    """What an engine implements to be inspected (the methods this module calls when an engine has them)."""

    def token_logprobs(self, context: str, continuation: str, top_k: int) -> ScoredTokens: ...

    def next_tokens(self, prompt: str, k: int, templated: bool) -> list[tuple[str, float]]: ...

    def chat_text(self, messages: list[ChatMessage]) -> str: ...


def unwrap(engine: Engine) -> Any:
    """The loaded engine under a mitigation wrapper (``mitigations/engine.py``), which only rewrites requests."""
    inner: Any = engine
    while hasattr(inner, "inner"):
        inner = inner.inner
    return inner


def _implementation(engine: Engine) -> Any:
    from themis_dagster.engines.fake import FakeEngine

    inner = unwrap(engine)
    if isinstance(inner, TokenInspector):
        return inner
    if isinstance(inner, FakeEngine):
        return _FakeInspector(inner)
    if type(inner).__name__ == "VLLMEngine":
        return _VLLMInspector(inner)
    if type(inner).__name__ == "OpenAICompatibleEngine":  # a running vllm-server, or a model behind an API
        from themis_dagster.engines.openai.inspection import OpenAIInspector

        return OpenAIInspector(inner)
    raise NotSupportedError(
        f"the {getattr(inner.info, 'engine', type(inner).__name__)} engine does not expose token log-probabilities "
        "here (in-process vLLM, the fake engine and the OpenAI-compatible engine do)"
    )


def token_logprobs(engine: Engine, context: str, continuation: str, top_k: int = 5) -> ScoredTokens:
    """``continuation`` after ``context``, token by token (split as the engine's loglikelihood splits it)."""
    return _implementation(engine).token_logprobs(context, continuation, max(0, min(top_k, 20)))  # type: ignore[no-any-return]


def next_tokens(engine: Engine, prompt: str, k: int = 10, *, templated: bool = False) -> list[tuple[str, float]]:
    """The ``k`` most likely next tokens after ``prompt``, best first.

    ``templated``: ``prompt`` is a chat template's text (:func:`chat_text`), which writes its own
    special tokens; otherwise it is encoded as ``generate`` encodes a prompt (with them).
    """
    return _implementation(engine).next_tokens(prompt, max(1, min(k, 20)), templated)  # type: ignore[no-any-return]


def chat_text(engine: Engine, messages: list[ChatMessage]) -> str:
    """The text the model sees for ``messages`` before its reply (chat template, generation prompt added)."""
    return _implementation(engine).chat_text(messages)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------


def _unit(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0x1_0000_0000


FAKE_VOCABULARY = ("1", "2", "yes", "no", "the", "a", "he", "she", "they", "A", "B", "C", ".", ",", "I")


class _FakeInspector:
    """The fake engine's numbers, token = whitespace-separated word; sums equal ``FakeEngine.loglikelihood``."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def token_logprobs(self, context: str, continuation: str, top_k: int) -> ScoredTokens:
        words = continuation.split() or [continuation]
        extra = _unit(context + "\x00" + continuation)  # the fake engine's -2 per word, minus this once
        tokens = [
            TokenScore(word, -2.0 - (extra if index == len(words) - 1 else 0.0), 2, [("the", -1.0)][:top_k])
            for index, word in enumerate(words)
        ]
        return ScoredTokens(context, continuation, tokens, len(context.split()) or 1)

    def next_tokens(self, prompt: str, k: int, templated: bool) -> list[tuple[str, float]]:
        scores = {token: 4.0 * _unit(f"{prompt}\x00{token}") for token in FAKE_VOCABULARY}
        total = math.log(sum(math.exp(score) for score in scores.values()))
        ranked = sorted(((token, score - total) for token, score in scores.items()), key=lambda pair: -pair[1])
        return ranked[:k]

    def chat_text(self, messages: list[ChatMessage]) -> str:
        return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


class _VLLMInspector:
    """Through the loaded ``VLLMEngine``'s own ``vllm.LLM``, tokenizer and LoRA adapter (no second engine)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def _decode(self, token_id: int) -> str:
        return str(self.engine.tokenizer.decode([token_id]))

    def token_logprobs(self, context: str, continuation: str, top_k: int) -> ScoredTokens:
        from vllm import SamplingParams, TokensPrompt

        from themis_dagster.engines.tokenization import encode_pair, truncate_left

        engine = self.engine
        context_ids, continuation_ids = encode_pair(engine._encode, engine.prefix_token_id, context, continuation)
        tokens, context_len, truncated = truncate_left(context_ids, continuation_ids, engine.max_len - 1)
        params = SamplingParams(max_tokens=1, prompt_logprobs=top_k, detokenize=False, temperature=0.0)
        outputs = engine.llm.generate(
            [TokensPrompt(prompt_token_ids=tokens)], params, use_tqdm=False, lora_request=engine.lora_request
        )
        logprobs = outputs[0].prompt_logprobs
        scored = []
        for position in range(max(context_len, 1), len(tokens)):
            entries = logprobs[position]
            actual = entries[tokens[position]]
            top = sorted(((tid, e) for tid, e in entries.items() if e.rank <= top_k), key=lambda pair: pair[1].rank)
            scored.append(
                TokenScore(
                    self._decode(tokens[position]),
                    float(actual.logprob),
                    int(actual.rank),
                    [(self._decode(tid), float(e.logprob)) for tid, e in top],
                )
            )
        return ScoredTokens(context, continuation, scored, context_len, truncated)

    def next_tokens(self, prompt: str, k: int, templated: bool) -> list[tuple[str, float]]:
        from vllm import SamplingParams, TokensPrompt

        engine = self.engine
        ids = list(engine.tokenizer.encode(prompt, add_special_tokens=not templated))
        params = SamplingParams(max_tokens=1, logprobs=k, temperature=0.0, detokenize=False)
        outputs = engine.llm.generate(
            [TokensPrompt(prompt_token_ids=ids[-(engine.max_len - 1) :])],
            params,
            use_tqdm=False,
            lora_request=engine.lora_request,
        )
        entries = outputs[0].outputs[0].logprobs[0]
        ranked = sorted(entries.items(), key=lambda pair: -pair[1].logprob)[:k]
        return [(self._decode(token_id), float(entry.logprob)) for token_id, entry in ranked]

    def chat_text(self, messages: list[ChatMessage]) -> str:
        if self.engine.spec.chat_template is None:
            raise NotSupportedError(f"{self.engine.spec.id} declares no chat template (a base model)")
        return str(self.engine.render_chat(messages))
