"""Send a partition's requests to an engine in as few batched calls as possible."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Self

from themis_dagster.engines.base import AnswerSink, Engine
from themis_dagster.exchange import GenerationParams, Request, Response


@dataclass
class Tally:
    """Counters that add up field by field: the work of several calls counted as one (a nested tally adds its own)."""

    def add(self, other: Self) -> None:
        """Count ``other``'s work too (several chunks of one partition, or one asset answering in several calls)."""
        for counter in fields(self):
            mine = getattr(self, counter.name)
            if isinstance(mine, Tally):
                mine.add(getattr(other, counter.name))
            else:
                setattr(self, counter.name, mine + getattr(other, counter.name))


@dataclass
class DispatchStats(Tally):
    requests: int = 0
    engine_seconds: float = 0.0
    # the part of engine_seconds spent in this platform's hand-off of streamed answers (timing them,
    # the caller's ``on_answered``): the engine waits for it, but it is the platform's work
    handoff_seconds: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    errors: int = 0
    retried: int = 0

    @property
    def tokens_per_second(self) -> float:
        total = self.prompt_tokens + self.output_tokens
        return total / self.engine_seconds if self.engine_seconds > 0 else 0.0


def _answer(
    engine: Engine,
    batch: list[Request],
    params: GenerationParams | None,
    stats: DispatchStats,
    on_answered: AnswerSink | None = None,
) -> list[Response]:
    """One engine call for ``batch`` (``params``: None for loglikelihoods and embeddings); each answer gets its
    share of its time.

    ``on_answered`` gets the answers the engine finishes while the call runs, where the engine hands them on
    (``streams_answers``), each with its share of the time so far; the call returns those same answers.
    """
    started = time.perf_counter()
    streamed: dict[str, Response] = {}
    streaming = engine.streams_answers and on_answered is not None

    def sink(finished: Sequence[Response]) -> None:
        assert on_answered is not None
        now = time.perf_counter()
        share = (now - started) / max(len(streamed) + len(finished), 1)
        timed = [_timed(response, share) for response in finished if response.request_id not in streamed]
        for response in timed:
            streamed[response.request_id] = response
        on_answered(timed)
        stats.handoff_seconds += time.perf_counter() - now

    if batch[0].request_type == "embedding":  # an optional request type: an engine without it fails the batch
        responses = engine.embed(batch)
    elif streaming:
        if params is None:
            responses = engine.loglikelihood(batch, on_answered=sink)
        elif batch[0].request_type == "chat":
            responses = engine.chat(batch, params, on_answered=sink)
        else:
            responses = engine.generate(batch, params, on_answered=sink)
    elif params is None:
        responses = engine.loglikelihood(batch)
    elif batch[0].request_type == "chat":
        responses = engine.chat(batch, params)
    else:
        responses = engine.generate(batch, params)
    elapsed = time.perf_counter() - started
    stats.engine_seconds += elapsed
    share = elapsed / len(batch)
    answered = []
    for _, response in zip(batch, responses, strict=True):
        stats.prompt_tokens += response.n_prompt_tokens or 0
        stats.output_tokens += response.n_output_tokens or 0
        answered.append(streamed.get(response.request_id) or _timed(response, share))
    return answered


def _timed(response: Response, share: float) -> Response:
    """``response`` with its share of the batch's time; a request the engine could not answer at all
    (``Request.failed``) took none of it."""
    return response if response.finish_reason is None else _with_latency(response, share)


def _with_latency(response: Response, latency_s: float) -> Response:
    """A copy of ``response`` with its share of the batch's time (``dataclasses.replace`` without re-running
    ``__init__``: the copy of a valid response is valid, and this runs once per request)."""
    copy = object.__new__(Response)
    copy.__dict__.update(response.__dict__, latency_s=latency_s)
    return copy


def _failed(batch: list[Request], error: Exception) -> list[Response]:
    message = f"{type(error).__name__}: {error}"[:2000]
    return [request.failed(message) for request in batch]


def dispatch(
    engine: Engine, requests: list[Request], retries: int = 0, on_answered: AnswerSink | None = None
) -> tuple[list[Response], DispatchStats]:
    """Answer every request; one engine call per request type and generation setting.

    A failing batch is recorded as errors on its requests (the rest still run), so
    nothing already answered is lost; requests that failed are re-sent up to ``retries``
    times, and only those. ``on_answered`` sees answers as the engine finishes them, where it
    can hand them on (``engines/base.py``); the returned list holds every answer regardless.
    """
    responses, stats = _dispatch_once(engine, requests, on_answered)
    for _ in range(retries):
        failed = [request for request, response in zip(requests, responses, strict=True) if response.error]
        if not failed:
            break
        again, more = _dispatch_once(engine, failed, on_answered)
        stats.engine_seconds += more.engine_seconds
        stats.handoff_seconds += more.handoff_seconds
        stats.prompt_tokens += more.prompt_tokens
        stats.output_tokens += more.output_tokens
        stats.retried += len(failed)
        replaced = {response.request_id: response for response in again}
        responses = [replaced.get(response.request_id, response) for response in responses]
    stats.errors = sum(1 for response in responses if response.error)
    return responses, stats


def _dispatch_once(
    engine: Engine, requests: list[Request], on_answered: AnswerSink | None = None
) -> tuple[list[Response], DispatchStats]:
    stats = DispatchStats(requests=len(requests))
    batches: dict[tuple[str, str], list[Request]] = defaultdict(list)
    for request in requests:
        key = json.dumps(request.gen_params, sort_keys=True) if request.gen_params else "{}"
        batches[(request.request_type, key)].append(request)
    answered: dict[str, Response] = {}
    for (request_type, params_json), batch in batches.items():
        try:
            params = None
            if request_type not in ("loglikelihood", "embedding"):
                params = GenerationParams.model_validate(json.loads(params_json))
            produced = _answer(engine, batch, params, stats, on_answered)
        except Exception as error:  # noqa: BLE001 - recorded per request, surfaced by the asset
            produced = _failed(batch, error)
        for response in produced:
            answered[response.request_id] = response
    ordered = [answered[r.request_id] for r in requests]
    stats.errors = sum(1 for response in ordered if response.error)
    return ordered, stats
