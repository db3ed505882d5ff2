"""What every inference engine answers: loglikelihoods, completions and chat replies.

An engine takes ``Request``s and returns one ``Response`` per request, in order, carrying
the request's ``request_id``, ``item_id`` and ``request_type`` (``Request.scored``,
``generated`` and ``failed`` build them). A request it could not answer gets a
``Response`` with ``error`` set instead of a score or text, so the answers it did get are
never lost. The dispatcher only times the batches, counts tokens and errors, and retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from themis_dagster.exchange import GenerationParams, Request, Response


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
