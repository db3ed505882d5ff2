"""Send a partition's requests to an engine in as few batched calls as possible."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, replace

from themis_dagster.engines.base import Engine, GenerationResult, LoglikelihoodResult
from themis_dagster.exchange import GenerationParams, LoglikelihoodRequest, Request, Response


@dataclass
class DispatchStats:
    requests: int = 0
    engine_seconds: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    errors: int = 0
    retried: int = 0

    @property
    def tokens_per_second(self) -> float:
        total = self.prompt_tokens + self.output_tokens
        return total / self.engine_seconds if self.engine_seconds > 0 else 0.0


def _scored(request: Request, result: LoglikelihoodResult, latency_s: float, stats: DispatchStats) -> Response:
    if result.error is not None or result.logprob is None or result.is_greedy is None:
        return request.failed(result.error or "no score")
    tokens = result.n_context_tokens + result.n_continuation_tokens
    stats.prompt_tokens += tokens
    scored = request.scored(
        result.logprob,
        result.is_greedy,
        n_prompt_tokens=tokens,
        n_continuation_tokens=result.n_continuation_tokens,
        truncated=result.truncated,
    )
    return replace(scored, latency_s=latency_s)


def _generated(request: Request, result: GenerationResult, latency_s: float, stats: DispatchStats) -> Response:
    stats.prompt_tokens += result.n_prompt_tokens
    stats.output_tokens += result.n_output_tokens
    generated = request.generated(
        result.text,
        result.prompt_text,
        result.n_prompt_tokens,
        result.n_output_tokens,
        result.finish_reason,
        result.error,
    )
    return replace(generated, latency_s=latency_s)


def _loglikelihood(engine: Engine, batch: list[Request], stats: DispatchStats) -> list[Response]:
    started = time.perf_counter()
    results = engine.loglikelihood([LoglikelihoodRequest(r.context or "", r.continuation or "") for r in batch])
    elapsed = time.perf_counter() - started
    stats.engine_seconds += elapsed
    share = elapsed / len(batch)
    return [_scored(request, result, share, stats) for request, result in zip(batch, results, strict=True)]


def _generation(engine: Engine, batch: list[Request], params: GenerationParams, stats: DispatchStats) -> list[Response]:
    started = time.perf_counter()
    if batch[0].request_type == "chat":
        results = engine.chat([r.messages or [] for r in batch], params)
    else:
        results = engine.generate([r.prompt or "" for r in batch], params)
    elapsed = time.perf_counter() - started
    stats.engine_seconds += elapsed
    share = elapsed / len(batch)
    return [_generated(request, result, share, stats) for request, result in zip(batch, results, strict=True)]


def _failed(batch: list[Request], error: Exception) -> list[Response]:
    message = f"{type(error).__name__}: {error}"[:2000]
    return [request.failed(message) for request in batch]


def dispatch(engine: Engine, requests: list[Request], retries: int = 0) -> tuple[list[Response], DispatchStats]:
    """Answer every request; one engine call per request type and generation setting.

    A failing batch is recorded as errors on its requests (the rest still run), so
    nothing already answered is lost; requests that failed are re-sent up to ``retries``
    times, and only those.
    """
    responses, stats = _dispatch_once(engine, requests)
    for _ in range(retries):
        failed = [request for request, response in zip(requests, responses, strict=True) if response.error]
        if not failed:
            break
        again, more = _dispatch_once(engine, failed)
        stats.engine_seconds += more.engine_seconds
        stats.prompt_tokens += more.prompt_tokens
        stats.output_tokens += more.output_tokens
        stats.retried += len(failed)
        replaced = {response.request_id: response for response in again}
        responses = [replaced.get(response.request_id, response) for response in responses]
    stats.errors = sum(1 for response in responses if response.error)
    return responses, stats


def _dispatch_once(engine: Engine, requests: list[Request]) -> tuple[list[Response], DispatchStats]:
    stats = DispatchStats(requests=len(requests))
    batches: dict[tuple[str, str], list[Request]] = defaultdict(list)
    for request in requests:
        key = json.dumps(request.gen_params or {}, sort_keys=True)
        batches[(request.request_type, key)].append(request)
    answered: dict[str, Response] = {}
    for (request_type, params_json), batch in batches.items():
        try:
            if request_type == "loglikelihood":
                produced = _loglikelihood(engine, batch, stats)
            else:
                params = GenerationParams.model_validate(json.loads(params_json))
                produced = _generation(engine, batch, params, stats)
        except Exception as error:  # noqa: BLE001 - recorded per request, surfaced by the asset
            produced = _failed(batch, error)
        for response in produced:
            answered[response.request_id] = response
    ordered = [answered[r.request_id] for r in requests]
    stats.errors = sum(1 for response in ordered if response.error)
    return ordered, stats
