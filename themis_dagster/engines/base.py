"""What every inference engine is: the ``Engine`` base class, its capabilities and their defaults.

An engine takes ``Request``s and returns one ``Response`` per request, in order, carrying
the request's ``request_id``, ``item_id`` and ``request_type`` (``Request.scored``,
``generated`` and ``failed`` build them). A request it could not answer gets a
``Response`` with ``error`` set instead of a score or text, so the answers it did get are
never lost. The dispatcher only times the batches, counts tokens and errors, and retries.

Every capability is a documented member of ``Engine`` with a default, as every optional
hook of lm-eval's ``LM`` is: callers read ``engine.streams_answers`` or call
``engine.embed(...)`` and never probe an engine for what it has. An engine overrides what it
does (a class attribute, or an attribute set in ``__init__`` declared on its class).
``engines/wrapper.py``'s ``EngineWrapper`` forwards every member to the engine it wraps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from themis_dagster.engines.token_scores import NotSupportedError, TokenInspector
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


class Engine:
    """A loaded model. Implementations batch internally; callers pass whole lists.

    ``info`` (``EngineInfo``) is set by every engine when it is built. The request types
    (``loglikelihood``, ``generate``, ``chat``, ``embed``) each fail by default, saying that
    the engine does not answer them; ``engines/dispatch.py`` records such a failure on the
    batch's requests, so a task an engine cannot answer never stops the run. ``on_answered``
    is passed only to an engine whose ``streams_answers`` is True; one that does not stream
    may leave the parameter out.
    """

    info: EngineInfo

    # -- capabilities: what an engine does, read by the platform (defaults: the least an engine does) --

    @property
    def streams_answers(self) -> bool:
        """Whether it hands finished answers to ``on_answered`` while a batch runs (``AnswerSink``)."""
        return False

    @property
    def applies_reasoning(self) -> bool:
        """Whether it splits a reasoning model's replies and adds its reasoning budget itself.

        False: ``engines/reasoning.py`` wraps it in ``ReasoningBudget`` for a reasoning model
        (its server splits the replies; the wrapper adds the budget).
        """
        return False

    @property
    def in_process(self) -> bool:
        """Whether it holds nothing outside this process, so a process that exits may leave it to the OS."""
        return False

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer here (``encode(text, add_special_tokens=False)``), or None where it has none.

        A mitigation that names words (``mitigation.words``) needs it to find their token ids.
        """
        return None

    # -- the requests it answers --------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[Request], on_answered: AnswerSink | None = None) -> list[Response]:
        """The summed log-probability of each request's continuation after its context."""
        raise NotImplementedError(f"{type(self).__name__} scores no continuations")

    def generate(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        """A completion of each request's prompt (sent as text)."""
        raise NotImplementedError(f"{type(self).__name__} completes no prompts")

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        """A reply to each request's conversation (through the model's chat template)."""
        raise NotImplementedError(f"{type(self).__name__} answers no conversations")

    def embed(self, requests: Sequence[Request]) -> list[Response]:
        """Word vectors of each request's prompt (``Request.embedded``): an optional request type."""
        raise NotImplementedError(f"{type(self).__name__} computes no embeddings")

    # -- looking inside, and the end ----------------------------------------------------------

    def inspector(self) -> TokenInspector:
        """What the playground looks inside it with (``engines/inspection.py``); NotSupportedError by default."""
        raise NotSupportedError(
            f"the {self.info.engine} engine does not expose token log-probabilities here "
            "(in-process vLLM, the fake engine and the OpenAI-compatible engine do)"
        )

    def shutdown(self) -> None:
        """Free what it holds (worker processes, memory); by default there is nothing to free."""
