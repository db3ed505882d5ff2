"""Answer a partition's requests a chunk at a time, committing each chunk's answers as it arrives.

Every answer is appended to the ``request_cache`` table under its request fingerprint
(``engines/fingerprint.py``) as soon as its chunk returns. A run killed at any moment loses at
most the chunk in flight: run again, it reads what is cached and sends only the rest, and the
same request for the same model is never computed twice, across runs and partitions alike
(lm-eval's request cache does the same for its own runs). Failed answers are never cached, so
they are sent again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from themis_dagster.engines.base import Engine
from themis_dagster.engines.dispatch import DispatchStats, dispatch
from themis_dagster.engines.fingerprint import cacheable, request_fingerprint
from themis_dagster.exchange import Request, Response
from themis_dagster.resources import WarehouseResource
from themis_dagster.tasks.spec import Item, Resend
from themis_dagster.warehouse import append_new, read_by_key
from themis_dagster.warehouse.frames import rows_frame
from themis_dagster.warehouse.tables import declared

CACHE = "request_cache"
_IDENTITY = ("request_id", "item_id", "error")


@dataclass
class AnswerStats:
    """What the engine did for a partition, and what it was spared."""

    dispatch: DispatchStats = field(default_factory=DispatchStats)
    reused: int = 0
    sent: int = 0
    chunks: int = 0
    cached_now: int = 0


def _answer_columns() -> tuple[str, ...]:
    """The columns a cached answer carries: the cache's, less its key and bookkeeping."""
    return tuple(name for name in declared(CACHE).column_names if name not in ("fingerprint", "model", "cached_at"))


def _from_cache(request: Request, row: Mapping[str, Any]) -> Response:
    """``request``'s response from a cached answer (who asked is the request's; the rest is the answer's)."""
    values = {f.name: row[f.name] for f in dataclasses.fields(Response) if f.name in row and f.name not in _IDENTITY}
    return dataclasses.replace(Response(request.request_id, request.item_id), **values)


def chunk_order(request: Request) -> tuple[str, str, str, str, str]:
    """The order requests are chunked in: by kind and sampling settings, then by text."""
    params = json.dumps(request.gen_params or {}, sort_keys=True)
    text = request.prompt if request.prompt is not None else json.dumps(request.messages or [])
    return (request.request_type, params, request.context or "", request.continuation or "", text)


def answer_requests(
    requests: Sequence[Request],
    *,
    engine: Callable[[], Engine],
    warehouse: WarehouseResource,
    model_id: str,
    model_fingerprint: str | None,
    chunk_size: int,
    retries: int,
) -> tuple[list[Response], AnswerStats]:
    """One response per request, in order; ``engine()`` is called only if something must be sent.

    ``model_fingerprint`` None turns the cache off: everything is sent and nothing is kept.
    """
    stats = AnswerStats()
    fingerprints = (
        {r.request_id: request_fingerprint(model_fingerprint, r) for r in requests if cacheable(r)}
        if model_fingerprint is not None
        else {}
    )
    answered: dict[str, Response] = {}
    if fingerprints:
        with warehouse.connect() as conn:
            cached = read_by_key(conn, CACHE, "fingerprint", sorted(set(fingerprints.values())))
        by_fingerprint = {row["fingerprint"]: row for row in cached.iter_rows(named=True)}
        for request in requests:
            row = by_fingerprint.get(fingerprints.get(request.request_id, ""))
            if row is not None:
                answered[request.request_id] = _from_cache(request, row)
    stats.reused = len(answered)
    # Chunks of like requests: one engine call per chunk and kind, and requests that share a
    # prefix (a context, a template) in the same call, where the engine's prefix reuse sees them.
    todo = sorted((r for r in requests if r.request_id not in answered), key=chunk_order)
    loaded = engine() if todo else None
    columns = _answer_columns()
    for start in range(0, len(todo), chunk_size):
        assert loaded is not None
        chunk = todo[start : start + chunk_size]
        responses, chunk_stats = dispatch(loaded, chunk, retries=retries)
        stats.dispatch.add(chunk_stats)
        stats.chunks += 1
        stats.sent += len(chunk)
        now = datetime.now(UTC).replace(tzinfo=None)
        keep = [
            {"fingerprint": fingerprints[r.request_id], "model": model_id, "cached_at": now}
            | {name: getattr(r, name) for name in columns}
            for r in responses
            if r.error is None and r.request_id in fingerprints
        ]
        if keep:
            with warehouse.connect() as conn:
                stats.cached_now += append_new(conn, CACHE, rows_frame(CACHE, keep), "fingerprint")
        answered.update((r.request_id, r) for r in responses)
    return [answered[r.request_id] for r in requests], stats


def answer_again(
    resend: Resend,
    params: Any,
    items: list[Item],
    requests: Sequence[Request],
    answers: list[Response],
    *,
    engine: Callable[[], Engine],
    warehouse: WarehouseResource,
    model_id: str,
    chunk_size: int,
    retries: int,
) -> tuple[list[Response], AnswerStats, int]:
    """Send again what the task could not judge (its ``RESEND``), round by round; (answers, stats, re-sent).

    Re-sent requests bypass the request cache (a cached answer would be the same reply again), and
    their new answers are not cached either: the cache keeps the first answer, so a run killed
    here repeats at most these rounds.
    """
    total, resent = AnswerStats(), 0
    for _ in range(resend.rounds(params)):
        wanted = set(resend.to_resend(items, list(requests), answers, params))
        again = [request for request in requests if request.request_id in wanted]
        if not again:
            break
        fresh, stats = answer_requests(
            again,
            engine=engine,
            warehouse=warehouse,
            model_id=model_id,
            model_fingerprint=None,
            chunk_size=chunk_size,
            retries=retries,
        )
        total.dispatch.add(stats.dispatch)
        total.sent += stats.sent
        total.chunks += stats.chunks
        replaced = {response.request_id: response for response in fresh}
        answers = [replaced.get(answer.request_id, answer) for answer in answers]
        resent += len(again)
    return answers, total, resent
