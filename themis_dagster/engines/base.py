"""What every inference engine answers: loglikelihoods, completions and chat replies.

An engine takes ``Request``s and returns one ``Response`` per request, in order, carrying
the request's ``request_id``, ``item_id`` and ``request_type`` (``Request.scored``,
``generated`` and ``failed`` build them). A request it could not answer gets a
``Response`` with ``error`` set instead of a score or text, so the answers it did get are
never lost. The dispatcher only times the batches, counts tokens and errors, and retries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from themis_dagster.exchange import GenerationParams, Request, Response

AnswerSink = Callable[[Sequence[Response]], None]
"""Receives answers while a batch runs, as the engine finishes them (any order, each answer once).

An engine with ``streams_answers = True`` accepts ``on_answered=`` on ``loglikelihood``,
``generate`` and ``chat`` and calls it with finished answers before the batch returns: what each
engine step finished, one call per step (vLLM in process, the fake engine), or each response as it
arrives (an OpenAI-compatible server). The caller can so commit answers every few seconds without
cutting the batch (the engine keeps its full batch and its prefix sharing). The batch's return
value still holds every answer, in order.
"""


class UnknownAnswerError(RuntimeError):
    """The engine finished a request it was not given: never filed under another prompt."""


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

    def loglikelihood(self, requests: Sequence[Request]) -> list[Response]: ...

    def generate(self, requests: Sequence[Request], params: GenerationParams) -> list[Response]: ...

    def chat(self, requests: Sequence[Request], params: GenerationParams) -> list[Response]: ...

    def shutdown(self) -> None: ...


class StreamingEngine(Engine, Protocol):
    """An engine that hands finished answers on while a batch runs (``streams_answers`` True)."""

    streams_answers: bool

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]: ...

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]: ...

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]: ...
