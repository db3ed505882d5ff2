"""What every inference engine answers: loglikelihoods, completions and chat replies.

An engine answers every request of a call, one result per request in order; a request
it could not answer gets a result with ``error`` set instead of a score or text, so the
answers it did get are never lost. The dispatcher turns these results into ``Response``s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from themis_dagster.exchange import ChatMessage, GenerationParams, LoglikelihoodRequest


@dataclass(frozen=True)
class LoglikelihoodResult:
    """A continuation's summed logprob and whether every token was the argmax (lm-eval's pair).

    A failed request has ``error`` set and no logprob (never a placeholder number that
    would read as a score).
    """

    logprob: float | None
    is_greedy: bool | None
    n_context_tokens: int = 0
    n_continuation_tokens: int = 0
    truncated: bool = False
    error: str | None = None

    @classmethod
    def failed(cls, error: str) -> LoglikelihoodResult:
        return cls(None, None, error=error)


@dataclass(frozen=True)
class GenerationResult:
    text: str
    prompt_text: str
    n_prompt_tokens: int
    n_output_tokens: int
    finish_reason: str
    error: str | None = None


@dataclass
class EngineInfo:
    """Facts about a loaded engine that make a result reproducible."""

    engine: str
    model_path: str
    versions: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    load_seconds: float = 0.0


class Engine(Protocol):
    """A loaded model. Implementations batch internally; callers pass whole lists."""

    info: EngineInfo

    def loglikelihood(self, requests: list[LoglikelihoodRequest]) -> list[LoglikelihoodResult]: ...

    def generate(self, prompts: list[str], params: GenerationParams) -> list[GenerationResult]: ...

    def chat(self, conversations: list[list[ChatMessage]], params: GenerationParams) -> list[GenerationResult]: ...

    def shutdown(self) -> None: ...
