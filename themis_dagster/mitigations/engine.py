"""Any engine, with a variant's mitigation applied to what goes in and what comes out.

The wrapped engine is the parent's own (``EngineResource.engine_for`` loads it once for a
model and all its variants); only the requests, the sampling settings and the replies change.
Everything else (its capabilities, embeddings, inspection) is the parent's, forwarded by
``EngineWrapper``: a mitigation changes no word vector, so a variant's ``iat_weat`` is its parent's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from themis_dagster.engines.base import AnswerSink, Engine
from themis_dagster.engines.wrapper import EngineWrapper
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


class MitigatedEngine(EngineWrapper):
    """An ``Engine`` that applies one mitigation around ``inner`` (the rest is ``inner``'s: ``EngineWrapper``)."""

    def __init__(self, inner: Engine, mitigation: Mitigation) -> None:
        super().__init__(inner, {"mitigation": describe(mitigation)})
        self.mitigation = mitigation
        self._bias: dict[int, float] | None = None

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
                tokenizer = self.tokenizer
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

    def _sink(self, on_answered: AnswerSink | None) -> AnswerSink | None:
        """``on_answered`` given the replies as this mitigation leaves them."""
        if on_answered is None:
            return None
        sink = on_answered
        return lambda answers: sink(self._replies(list(answers)))

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]:
        """Only a system prompt changes a loglikelihood (it becomes part of the context)."""
        return super().loglikelihood(self._rewrite(requests), on_answered)

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        return self._answered(super().generate, requests, params, on_answered)

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        return self._answered(super().chat, requests, params, on_answered)

    def _answered(
        self,
        ask: Callable[[Sequence[Request], GenerationParams, AnswerSink | None], list[Response]],
        requests: Sequence[Request],
        params: GenerationParams,
        on_answered: AnswerSink | None,
    ) -> list[Response]:
        """Generation and chat alike: rewritten requests and params in, filtered replies out (streamed when asked)."""
        return self._replies(ask(self._rewrite(requests), self._params(params), self._sink(on_answered)))

    def shutdown(self) -> None:
        """The inner engine is the parent's: whoever loaded it shuts it down."""


def mitigated(engine: Engine, mitigation: Mitigation | None) -> Engine:
    """``engine`` itself without a mitigation, else wrapped in one."""
    return engine if mitigation is None else MitigatedEngine(engine, mitigation)
