"""``EngineWrapper``: an engine around another that forwards every member it does not change.

A reasoning model's budget (``engines/reasoning.py``'s ``ReasoningBudget``) and a mitigation
(``mitigations/engine.py``'s ``MitigatedEngine``) each change a few things about the engine they
wrap. Everything else -- every capability of ``Engine``, every request type (embeddings
included), the inspector and the shutdown -- is the wrapped engine's, forwarded here once, so a
wrapper cannot drop one (``tests/engines/test_wrapper.py`` checks every member of ``Engine``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from themis_dagster.engines.base import AnswerSink, Engine, EngineInfo
from themis_dagster.engines.token_scores import TokenInspector
from themis_dagster.exchange import GenerationParams, Request, Response


class EngineWrapper(Engine):
    """``inner`` with ``settings`` added to what its ``info`` records; every member forwarded to ``inner``."""

    def __init__(self, inner: Engine, settings: Mapping[str, Any]) -> None:
        self.inner = inner
        info = inner.info
        self.info = EngineInfo(
            info.engine, info.model_path, info.versions, dict(info.settings) | dict(settings), info.load_seconds
        )

    @property
    def streams_answers(self) -> bool:
        return self.inner.streams_answers

    @property
    def applies_reasoning(self) -> bool:
        return self.inner.applies_reasoning

    @property
    def in_process(self) -> bool:
        return self.inner.in_process

    @property
    def tokenizer(self) -> Any:
        return self.inner.tokenizer

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]:
        if on_answered is None:  # an engine that does not stream takes no sink
            return self.inner.loglikelihood(requests)
        return self.inner.loglikelihood(requests, on_answered=on_answered)

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        if on_answered is None:
            return self.inner.generate(requests, params)
        return self.inner.generate(requests, params, on_answered=on_answered)

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        if on_answered is None:
            return self.inner.chat(requests, params)
        return self.inner.chat(requests, params, on_answered=on_answered)

    def embed(self, requests: Sequence[Request]) -> list[Response]:
        return self.inner.embed(requests)

    def inspector(self) -> TokenInspector:
        """The wrapped engine's: the playground looks inside the loaded model, not at what a wrapper changes."""
        return self.inner.inspector()

    def shutdown(self) -> None:
        self.inner.shutdown()
