"""What tasks and engines exchange: a ``Request`` goes out, one ``Response`` comes back.

Tasks build requests and judge responses; engines answer them, one ``Response`` per
``Request`` built by the request itself (``scored``, ``generated``, ``failed``); the
warehouse stores both, and the ``MetricValue`` rows a task computes from them. This module
imports neither ``tasks`` nor ``engines`` so that each can depend on it without depending
on the other (lm-eval's ``Instance`` plays the same part: one object from request to score).
"""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any, Literal

from pydantic import Field

from themis_dagster.errors import StrictModel

RequestType = Literal["loglikelihood", "generate", "chat", "embedding"]

ChatMessage = dict[str, str]


class GenerationParams(StrictModel):
    """Sampling settings; greedy and seeded by default so a re-run reproduces its text."""

    max_tokens: int = Field(default=64, ge=1, le=8192)
    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = Field(default=1234, ge=0)
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    """One engine request derived from an item; several requests may share an item."""

    request_id: str
    item_id: str
    request_type: RequestType
    context: str | None = None
    continuation: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    template: str | None = None
    template_sha256: str | None = None
    gen_params: dict[str, Any] | None = None

    @classmethod
    def loglikelihood(cls, context: str, continuation: str, request_id: str = "", item_id: str = "") -> Request:
        """Score ``continuation`` after ``context`` (an empty context means: after the prefix token)."""
        return cls(request_id, item_id, "loglikelihood", context=context, continuation=continuation)

    @classmethod
    def completion(cls, prompt: str, request_id: str = "", item_id: str = "") -> Request:
        """Continue ``prompt`` as plain text."""
        return cls(request_id, item_id, "generate", prompt=prompt)

    @classmethod
    def conversation(cls, messages: list[ChatMessage], request_id: str = "", item_id: str = "") -> Request:
        """Reply to the chat ``messages``."""
        return cls(request_id, item_id, "chat", messages=messages)

    @classmethod
    def user_message(
        cls,
        content: str,
        request_id: str,
        item_id: str,
        template: str,
        template_sha256: str,
        gen_params: dict[str, Any],
        *,
        system: str | None = None,
        prompt: str | None = None,
    ) -> Request:
        """A task's chat request: one user message rendered from ``template``, with its generation settings.

        ``system``: a system message before it (none when empty); ``prompt``: the user message as plain
        text too, for the tasks that record it there.
        """
        system_messages: list[ChatMessage] = [{"role": "system", "content": system}] if system else []
        return cls(
            request_id,
            item_id,
            "chat",
            prompt=prompt,
            messages=[*system_messages, {"role": "user", "content": content}],
            template=template,
            template_sha256=template_sha256,
            gen_params=gen_params,
        )

    @property
    def pair(self) -> tuple[str, str]:
        """A loglikelihood request's (context, continuation), an absent one read as empty; equal pairs score equally."""
        return self.context or "", self.continuation or ""

    def scored(
        self,
        logprob: float,
        is_greedy: bool,
        *,
        n_prompt_tokens: int,
        n_continuation_tokens: int,
        truncated: bool = False,
    ) -> Response:
        """A loglikelihood request's answer: the continuation's summed logprob, and whether each token was the argmax.

        ``n_prompt_tokens`` were sent, the last ``n_continuation_tokens`` of them scored (lm-eval's
        split); ``truncated``: the context was cut on the left to fit the model's window.
        """
        return Response(
            self.request_id,
            self.item_id,
            logprob,
            is_greedy,
            request_type=self.request_type,
            n_prompt_tokens=n_prompt_tokens,
            n_output_tokens=0,
            finish_reason="truncated" if truncated else "scored",
            n_continuation_tokens=n_continuation_tokens,
        )

    def generated(
        self,
        text: str,
        prompt_text: str,
        n_prompt_tokens: int,
        n_output_tokens: int,
        finish_reason: str,
        error: str | None = None,
        *,
        reasoning: str | None = None,
        n_reasoning_tokens: int | None = None,
    ) -> Response:
        """The answer to a completion or chat request; ``prompt_text`` is exactly what the model saw.

        With ``error``: a request the engine took but could not complete, as far as it got. A
        reasoning model's reply comes split: ``text`` is its final answer only, ``reasoning`` what
        it thought first ("" where it opened a reasoning block and wrote nothing, None where none
        was found), ``n_reasoning_tokens`` how many tokens that took.
        """
        return Response(
            self.request_id,
            self.item_id,
            text=text,
            error=error,
            request_type=self.request_type,
            prompt_text=prompt_text,
            n_prompt_tokens=n_prompt_tokens,
            n_output_tokens=n_output_tokens,
            finish_reason=finish_reason,
            reasoning=reasoning,
            n_reasoning_tokens=n_reasoning_tokens,
        )

    @classmethod
    def embedding(cls, text: str, request_id: str = "", item_id: str = "") -> Request:
        """The model's own vectors for ``text`` (its input embeddings and hidden states), no generation."""
        return cls(request_id, item_id, "embedding", prompt=text)

    def embedded(self, vectors: dict[str, list[float]], tokens: list[str]) -> Response:
        """The answer to an embedding request: ``text`` holds ``{"vectors": {kind: [...]}, "tokens": [...]}``."""
        payload = json.dumps({"vectors": vectors, "tokens": tokens})
        return Response(
            self.request_id,
            self.item_id,
            text=payload,
            request_type=self.request_type,
            prompt_text=self.prompt,
            n_prompt_tokens=len(tokens),
            n_output_tokens=0,
            finish_reason="embedded",
        )

    def failed(self, error: str) -> Response:
        """The answer to a request the engine could not answer at all: ``error``, no score or text."""
        return Response(self.request_id, self.item_id, error=error, request_type=self.request_type)

    def adopt(self, response: Response) -> Response:
        """``response``, the answer to a request with the same text (a duplicate, a cached score), as this one's."""
        return replace(response, request_id=self.request_id, item_id=self.item_id, request_type=self.request_type)


@dataclass(frozen=True)
class Response:
    """The engine's answer to one request, exactly as the ``responses`` table stores it.

    A request the engine could not answer has ``error`` set (and no score or text); the
    others of its batch are answered as usual. The positional fields are the ones a task
    judges by; the rest record how the answer was produced and are passed by name.
    ``request_type`` is None only for responses a test builds by hand.
    """

    request_id: str
    item_id: str
    logprob: float | None = None
    is_greedy: bool | None = None
    text: str | None = None
    error: str | None = None
    _: KW_ONLY
    request_type: RequestType | None = None
    prompt_text: str | None = None
    n_prompt_tokens: int | None = None
    n_output_tokens: int | None = None
    finish_reason: str | None = None
    latency_s: float | None = None
    n_continuation_tokens: int | None = None  # loglikelihood: the scored tokens (the rest of the prompt is context)
    reasoning: str | None = None  # a reasoning model's thinking, split from ``text`` (the answer) by its vLLM parser
    n_reasoning_tokens: int | None = None


@dataclass(frozen=True)
class MetricValue:
    """One metric value a task computes (``subset`` None: its headline value), with its CI and sample size; the
    warehouse's ``metrics`` rows are these with their owners (``warehouse/read/metrics.py``' ``MetricRecord``)."""

    subset: str | None
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
