"""What the playground's inspection returns (``engines/inspection.py``) and what an inspector is, apart from how
each engine computes it, so that the engine base class and the engine-specific inspectors
(``engines/vllm/inspection.py``, ``engines/openai/inspection.py``) share the types without importing the module
that calls them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from themis_dagster.exchange import ChatMessage


class NotSupportedError(RuntimeError):
    """The engine cannot show this (an engine behind HTTP, or one without a tokenizer here)."""


@dataclass(frozen=True)
class TokenScore:
    """One scored token: its text, log-probability, rank (1 = the model's first choice) and the top alternatives."""

    token: str
    logprob: float
    rank: int | None
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class ScoredTokens:
    """A continuation scored token by token; ``logprob`` is their sum (the loglikelihood)."""

    context: str
    continuation: str
    tokens: list[TokenScore]
    n_context_tokens: int
    truncated: bool = False

    @property
    def logprob(self) -> float:
        return sum(token.logprob for token in self.tokens)

    @property
    def is_greedy(self) -> bool:
        return all(token.rank == 1 for token in self.tokens)


@runtime_checkable
class TokenInspector(Protocol):
    """What looks inside an engine for the playground (``Engine.inspector`` returns one)."""

    def token_logprobs(self, context: str, continuation: str, top_k: int) -> ScoredTokens: ...

    def next_tokens(self, prompt: str, k: int, templated: bool) -> list[tuple[str, float]]: ...

    def chat_text(self, messages: list[ChatMessage]) -> str: ...
