"""A deterministic stand-in engine for fast unit tests of parsing, judging and metrics.

It never replaces the real engine in the end-to-end tests; it lets the graph's
plumbing be tested in seconds.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from themis_dagster.engines.base import EngineInfo, GenerationResult, LoglikelihoodResult
from themis_dagster.exchange import ChatMessage, GenerationParams, LoglikelihoodRequest


def _unit(text: str) -> float:
    """A stable pseudo-random number in [0, 1) derived from ``text``."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0x1_0000_0000


class FakeEngine:
    """Scores a continuation by its word count and a hash; replies via ``reply`` or an echo.

    ``fail`` plays a request the engine could not answer: it gets the request's text (context
    plus continuation, or the prompt) and returns an error message, or None to answer it.
    """

    def __init__(
        self,
        model_path: str = "fake",
        reply: Callable[[str], str] | None = None,
        fail: Callable[[str], str | None] | None = None,
        latency_s: float = 0.0,
    ) -> None:
        self.info = EngineInfo("fake", model_path, {"fake": "1"}, {}, 0.0)
        self.latency_s = latency_s  # seconds each call takes, as a batch on an accelerator would
        self.reply = reply or (lambda prompt: "1")
        self.fail = fail or (lambda text: None)
        self.calls: list[str] = []

    def loglikelihood(self, requests: list[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        self._called(f"loglikelihood:{len(requests)}")
        results = []
        for request in requests:
            if (error := self.fail(request.context + request.continuation)) is not None:
                results.append(LoglikelihoodResult.failed(error))
                continue
            words = max(len(request.continuation.split()), 1)
            logprob = -2.0 * words - _unit(request.context + "\x00" + request.continuation)
            results.append(LoglikelihoodResult(logprob, False, len(request.context.split()) or 1, words))
        return results

    def generate(self, prompts: list[str], params: GenerationParams) -> list[GenerationResult]:
        self._called(f"generate:{len(prompts)}")
        return [self._result(prompt, prompt) for prompt in prompts]

    def chat(self, conversations: list[list[ChatMessage]], params: GenerationParams) -> list[GenerationResult]:
        self._called(f"chat:{len(conversations)}")
        return [self._result(conversation[-1]["content"], str(conversation)) for conversation in conversations]

    def _result(self, prompt: str, prompt_text: str) -> GenerationResult:
        if (error := self.fail(prompt)) is not None:
            return GenerationResult("", prompt_text, len(prompt.split()), 0, "error", error)
        text = self.reply(prompt)
        return GenerationResult(text, prompt_text, len(prompt.split()), len(text.split()), "stop")

    def _called(self, call: str) -> None:
        self.calls.append(call)
        time.sleep(self.latency_s)

    def shutdown(self) -> None:
        pass
