"""Any engine, with a variant's mitigation applied to what goes in and what comes out.

The wrapped engine is the parent's own (``EngineResource.engine_for`` loads it once for a
model and all its variants); only the requests, the sampling settings and the replies change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from themis_dagster.engines.base import AnswerSink, Engine, EngineInfo, StreamingEngine
from themis_dagster.exchange import GenerationParams, Request, Response
from themis_dagster.mitigations.requests import filtered_reply, with_instruction, with_system_prompt, word_token_ids
from themis_dagster.registry.mitigation import (
    InstructionTemplate,
    LogitBias,
    Mitigation,
    ReplyFilter,
    SystemPrompt,
    stage_of,
)


class BiasedParams(GenerationParams):
    """Sampling settings plus a logit bias by token id (read by the vLLM and OpenAI engines)."""

    logit_bias: dict[int, float]


def describe(mitigation: Mitigation) -> dict[str, Any]:
    """The mitigation as recorded with a run: its stage and every declared setting."""
    return {"stage": stage_of(mitigation)} | mitigation.model_dump(mode="json")


class MitigatedEngine:
    """An ``Engine`` that applies one mitigation around ``inner``."""

    def __init__(self, inner: Engine, mitigation: Mitigation) -> None:
        self.inner = inner
        self.mitigation = mitigation
        settings = dict(inner.info.settings) | {"mitigation": describe(mitigation)}
        self.info = EngineInfo(inner.info.engine, inner.info.model_path, inner.info.versions, settings,
                               inner.info.load_seconds)  # fmt: skip
        self._bias: dict[int, float] | None = None

    @property
    def in_process(self) -> bool:
        return bool(getattr(self.inner, "in_process", False))

    def _rewrite(self, requests: Sequence[Request]) -> list[Request]:
        mitigation = self.mitigation
        if isinstance(mitigation, SystemPrompt):
            return [with_system_prompt(request, mitigation) for request in requests]
        if isinstance(mitigation, InstructionTemplate):
            return [with_instruction(request, mitigation) for request in requests]
        return list(requests)

    def _params(self, params: GenerationParams) -> GenerationParams:
        if not isinstance(self.mitigation, LogitBias):
            return params
        return BiasedParams(**params.model_dump(), logit_bias=self.logit_bias())

    def logit_bias(self) -> dict[int, float]:
        """The bias by token id; words need the engine's tokenizer (the vLLM engine has one)."""
        assert isinstance(self.mitigation, LogitBias)
        if self._bias is None:
            bias = dict(self.mitigation.token_ids)
            if self.mitigation.words:
                tokenizer = getattr(self.inner, "tokenizer", None)
                if tokenizer is None:
                    raise ValueError(
                        f"mitigation.words needs a local tokenizer; the {self.info.engine} engine has none: "
                        "give token_ids instead"
                    )
                for word, value in self.mitigation.words.items():
                    for token_id in word_token_ids(lambda text: list(tokenizer.encode(text, add_special_tokens=False)),
                                                   word):  # fmt: skip
                        bias[token_id] = value
            self._bias = bias
        return self._bias

    def _replies(self, responses: list[Response]) -> list[Response]:
        if isinstance(self.mitigation, ReplyFilter):
            return [filtered_reply(response, self.mitigation) for response in responses]
        return responses

    @property
    def streams_answers(self) -> bool:
        """Answers are handed on while a batch runs when the inner engine hands them on."""
        return bool(getattr(self.inner, "streams_answers", False))

    def _sink(self, on_answered: AnswerSink | None) -> AnswerSink | None:
        """``on_answered`` given the replies as this mitigation leaves them."""
        if on_answered is None:
            return None
        sink = on_answered
        return lambda answers: sink(self._replies(list(answers)))

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]:
        """Only a system prompt changes a loglikelihood (it becomes part of the context)."""
        if on_answered is None:
            return self.inner.loglikelihood(self._rewrite(requests))
        return cast(StreamingEngine, self.inner).loglikelihood(self._rewrite(requests), on_answered=on_answered)

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        return self._answered(cast(StreamingEngine, self.inner).generate, requests, params, on_answered)

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        return self._answered(cast(StreamingEngine, self.inner).chat, requests, params, on_answered)

    def _answered(
        self,
        ask: Callable[..., list[Response]],
        requests: Sequence[Request],
        params: GenerationParams,
        on_answered: AnswerSink | None,
    ) -> list[Response]:
        """Generation and chat alike: rewritten requests and params in, filtered replies out (streamed when asked)."""
        if on_answered is None:  # an engine that does not stream takes no sink
            return self._replies(ask(self._rewrite(requests), self._params(params)))
        return self._replies(ask(self._rewrite(requests), self._params(params), on_answered=self._sink(on_answered)))

    def shutdown(self) -> None:
        """The inner engine is the parent's: whoever loaded it shuts it down."""


def mitigated(engine: Engine, mitigation: Mitigation | None) -> Engine:
    """``engine`` itself without a mitigation, else wrapped in one."""
    return engine if mitigation is None else MitigatedEngine(engine, mitigation)
