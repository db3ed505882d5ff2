"""What the playground's inspection returns (``engines/inspection.py``), apart from how each engine computes it,
so that the engine-specific inspectors (``engines/openai/inspection.py``) share the types without importing
the module that picks them."""

from __future__ import annotations

from dataclasses import dataclass, field


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
