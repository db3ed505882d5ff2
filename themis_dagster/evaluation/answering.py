"""Answer a partition's requests a chunk at a time, committing each chunk's answers as it arrives.

Every answer is appended to the ``request_cache`` table under its request fingerprint
(``engines/fingerprint.py``). Answers are committed while the engine works: an engine that hands
finished answers on (``streams_answers``: vLLM in process, the fake engine) has them committed at
least every ``commit_interval_s`` seconds of inference, without cutting its batch; every chunk's
remaining answers are committed when it returns. A run killed at any moment loses at most the
answers of the last interval: run again, it reads what is cached and sends only the rest, and
the same request for the same model is never computed twice, across runs and partitions alike
(lm-eval's request cache does the same for its own runs). Failed answers are never cached, so
they are sent again.

This is the one path from a request to any model: the evaluated model's (``raw_responses``), a
second-opinion judge's (``judgments``, and the same judge's calibration: ``judge_calibration``) and a
template generator's (``langbite_augmented_templates``) requests all go through ``Answerer``
(built from a run's resources by ``assets/answerers.py``), and each asset reports what it reused
and sent with ``answering_metadata``. Only ``answer_frame``'s caller writes a stage table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import polars as pl

from themis_dagster.engines.base import Engine
from themis_dagster.engines.dispatch import DispatchStats, Tally, dispatch
from themis_dagster.engines.precision import DtypeChoice
from themis_dagster.evaluation.request_keys import cacheable_rows, request_fingerprints
from themis_dagster.evaluation.stage_io import Warehouse
from themis_dagster.exchange import Request, Response
from themis_dagster.tasks.spec import Item, Resend
from themis_dagster.warehouse.frames import from_frame, to_frame
from themis_dagster.warehouse.reads import read_by_key
from themis_dagster.warehouse.request_cache import CACHE, CacheAppender, cached_count, repeated_fingerprints
from themis_dagster.warehouse.tables import declared
from themis_dagster.warehouse.transactions import transaction


@dataclass
class AnswerStats(Tally):
    """What the engine did for a partition, and what it was spared."""

    dispatch: DispatchStats = field(default_factory=DispatchStats)
    reused: int = 0
    sent: int = 0
    chunks: int = 0
    cached_now: int = 0
    # wall seconds of commits made while the engine worked (its step loop waits for them): the
    # cost of committing at an interval rather than once per chunk
    interval_commit_seconds: float = 0.0
    interval_commits: int = 0


def answering_metadata(stats: AnswerStats, request_cache: bool) -> dict[str, Any]:
    """What an asset reports of its answers: reused from the request cache, sent, chunks committed."""
    return {
        "answers_reused": stats.reused,
        "requests_sent": stats.sent,
        "chunks_committed": stats.chunks,
        "interval_commits": stats.interval_commits,
        "interval_commit_seconds": round(stats.interval_commit_seconds, 3),
        "request_cache": "on" if request_cache else "off",
    }


def _answer_columns() -> tuple[str, ...]:
    """The columns a cached answer carries: the cache's, less its key and bookkeeping."""
    return tuple(name for name in declared(CACHE).column_names if name not in ("fingerprint", "model", "cached_at"))


def _response_columns() -> tuple[str, ...]:
    """The responses table's columns less the partition's (model, task)."""
    return tuple(name for name in declared("responses").column_names if name not in ("model", "task"))


def chunk_order(request: Request) -> tuple[str, str, str, str, str]:
    """The order requests are chunked in: by kind and sampling settings, then by text.

    ``answer_frame`` sorts a partition's prompts by the same keys, columnar (JSON as the
    warehouse stores it: keys sorted).
    """
    params = json.dumps(request.gen_params or {}, sort_keys=True)
    text = request.prompt if request.prompt is not None else json.dumps(request.messages or [], sort_keys=True)
    return (request.request_type, params, request.context or "", request.continuation or "", text)


def _in_chunk_order(prompts: pl.DataFrame) -> pl.DataFrame:
    """``prompts`` sorted by ``chunk_order``'s keys, ties kept in partition order."""
    return prompts[_chunk_order_indices(prompts)]


def _chunk_order_indices(prompts: pl.DataFrame) -> pl.Series:
    """The row indices of ``prompts`` in ``chunk_order`` (ties in partition order): chunks are gathered from
    these one at a time, so the partition is never held twice."""
    keys = [
        pl.col("request_type"),
        pl.col("gen_params").fill_null("{}"),
        pl.col("context").fill_null(""),
        pl.col("continuation").fill_null(""),
        pl.coalesce(pl.col("prompt"), pl.col("messages").fill_null("[]")),
        pl.col("_position"),
    ]
    # a key equal in every row orders nothing: leaving it out gives the same order, and a sort on
    # fewer string columns (crows_pairs: continuation and position only) is several times faster
    varying = [key for key in keys[:-1] if prompts.select(key.n_unique()).item() > 1]
    return prompts.select(pl.arg_sort_by([*varying, keys[-1]])).to_series()


def _fingerprints(prompts: pl.DataFrame, model_fingerprint: str | None) -> pl.Series:
    """Each prompt row's request fingerprint (None: not cacheable, or no cache), computed a column at a time."""
    if model_fingerprint is None:
        return pl.Series("_fingerprint", [None] * prompts.height, dtype=pl.String)
    fingerprints = request_fingerprints(prompts, model_fingerprint)
    return pl.select(
        pl.when(cacheable_rows(prompts)).then(fingerprints).otherwise(None).alias("_fingerprint")
    ).to_series()


class _IntervalCommits:
    """Commits a chunk's answers as the engine hands them on, at most once per ``interval_s`` seconds.

    Only the chunk's cacheable answers (no error, a fingerprint) are kept; what is committed here
    is left out of the chunk's closing commit.
    """

    def __init__(
        self, cache: CacheAppender, chunk: pl.DataFrame, model_id: str, interval_s: float, stats: AnswerStats
    ) -> None:
        self.cache, self.chunk, self.model_id, self.interval_s, self.stats = cache, chunk, model_id, interval_s, stats
        self.pending: list[Response] = []
        self.committed: set[str] = set()
        self.last = time.monotonic()

    def take(self, answers: Sequence[Response]) -> None:
        """The engine finished ``answers``: commit what is pending once the interval has passed."""
        self.pending += [answer for answer in answers if answer.error is None]
        if self.pending and time.monotonic() - self.last >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        started = time.perf_counter()
        answered = to_frame("responses", self.pending, model=self.model_id, task="").select(_response_columns())
        keys = self.chunk.select("request_id", "_fingerprint", "_repeated")
        rows = answered.join(keys, on="request_id", how="inner").filter(pl.col("_fingerprint").is_not_null())
        if rows.height:
            # engine_seconds at the interval: the warehouse is released at once, the engine is still working
            self.stats.cached_now += self.cache.append(_cache_rows(rows, self.model_id), engine_seconds=self.interval_s)
        self.committed.update(answer.request_id for answer in self.pending)
        self.pending = []
        self.last = time.monotonic()
        self.stats.interval_commits += 1
        self.stats.interval_commit_seconds += time.perf_counter() - started


def _cache_rows(answered: pl.DataFrame, model_id: str) -> pl.DataFrame:
    """Rows of ``request_cache`` (and ``_repeated``) for answered rows carrying ``_fingerprint``."""
    now = datetime.now(UTC).replace(tzinfo=None)
    return answered.with_columns(
        pl.col("_fingerprint").alias("fingerprint"),
        pl.lit(model_id).alias("model"),
        pl.lit(now, dtype=pl.Datetime("us")).alias("cached_at"),
    ).select(*declared(CACHE).column_names, "_repeated")


def answer_frame(
    prompts: pl.DataFrame,
    *,
    engine: Callable[[], Engine],
    warehouse: Warehouse,
    model_id: str,
    model_fingerprint: str | None,
    chunk_size: int,
    retries: int,
    commit_interval_s: float = 10.0,
) -> tuple[pl.DataFrame, AnswerStats]:
    """The responses to a partition's prompt rows, one per row and in their order, as a frame of the
    responses table's columns less (model, task); ``engine()`` is called only if something must be sent.

    Columnar throughout: only the chunk in flight exists as ``Request``/``Response`` objects.
    ``model_fingerprint`` None turns the cache off: everything is sent and nothing is kept.
    """
    stats = AnswerStats()
    schema = declared("responses").frame_schema
    columns = _response_columns()
    prompts = prompts.with_row_index("_position")
    prompts = prompts.with_columns(_fingerprints(prompts, model_fingerprint))
    parts: list[pl.DataFrame] = []
    wanted = prompts.get_column("_fingerprint").drop_nulls().unique()
    expected = 0
    if wanted.len():
        with warehouse.connect() as conn, transaction(conn):  # the lookup and the count it goes with: one snapshot
            cached = read_by_key(conn, CACHE, "fingerprint", wanted.sort().to_list())
            expected = cached_count(conn)
        hits = prompts.select("_position", "request_id", "item_id", "_fingerprint").join(
            cached.select("fingerprint", *_answer_columns()), left_on="_fingerprint", right_on="fingerprint"
        )
        reused = hits.with_columns(pl.lit(None, dtype=pl.String).alias("error"))
        parts.append(reused.select("_position", *columns).cast({name: schema[name] for name in columns}))
        prompts = prompts.join(hits.select("_position"), on="_position", how="anti")
        stats.reused = hits.height
    # Chunks of like requests: one engine call per chunk and kind, and requests that share a
    # prefix (a context, a template) in the same call, where the engine's prefix reuse sees them.
    todo = prompts.with_columns(repeated_fingerprints(prompts.get_column("_fingerprint")).alias("_repeated"))
    del prompts
    order = _chunk_order_indices(todo)
    loaded = engine() if todo.height else None
    with CacheAppender(warehouse.get_connection, expected) as cache:
        for start in range(0, todo.height, chunk_size):
            assert loaded is not None
            chunk = todo[order.slice(start, chunk_size)]
            commits = _IntervalCommits(cache, chunk, model_id, commit_interval_s, stats)
            responses, chunk_stats = dispatch(
                loaded,
                from_frame("prompts", chunk, Request),
                retries=retries,
                on_answered=commits.take if model_fingerprint is not None else None,
            )
            stats.dispatch.add(chunk_stats)
            stats.chunks += 1
            stats.sent += chunk.height
            answered = to_frame("responses", responses, model=model_id, task="").select(columns)
            answered = answered.with_columns(chunk.get_column("_position"), chunk.get_column("_fingerprint"))
            keep = answered.with_columns(chunk.get_column("_repeated")).filter(
                pl.col("error").is_null()
                & pl.col("_fingerprint").is_not_null()
                & ~pl.col("request_id").is_in(list(commits.committed))
            )
            if keep.height:
                stats.cached_now += cache.append(_cache_rows(keep, model_id), engine_seconds=chunk_stats.engine_seconds)
            else:
                cache.append(None, engine_seconds=chunk_stats.engine_seconds)
            parts.append(answered.select("_position", *columns))
    if not parts:
        return pl.DataFrame(schema={name: schema[name] for name in columns}), stats
    return pl.concat(parts).sort("_position").drop("_position"), stats


def answer_requests(
    requests: Sequence[Request], *, retries: int, **answerer: Any
) -> tuple[list[Response], AnswerStats]:
    """One response per request, in order (``answer_frame`` for records); ``answerer``: an ``Answerer``'s
    fields by name (engine, warehouse, model_id, ...), as ``answer_frame`` takes them."""
    return Answerer(**answerer).answer(requests, retries=retries)


def answer_again(
    resend: Resend,
    params: Any,
    items: list[Item],
    requests: Sequence[Request],
    answers: list[Response],
    answerer: Answerer,
    *,
    retries: int,
) -> tuple[list[Response], AnswerStats, int]:
    """Send again what the task could not judge (its ``RESEND``), round by round; (answers, stats, re-sent).

    Re-sent requests bypass the request cache (a cached answer would be the same reply again), and
    their new answers are not cached either: the cache keeps the first answer, so a run killed
    here repeats at most these rounds.
    """
    uncached = replace(answerer, model_fingerprint=None)
    total, resent = AnswerStats(), 0
    for _ in range(resend.rounds(params)):
        wanted = set(resend.to_resend(items, list(requests), answers, params))
        again = [request for request in requests if request.request_id in wanted]
        if not again:
            break
        fresh, stats = uncached.answer(again, retries=retries)
        total.add(stats)
        replaced = {response.request_id: response for response in fresh}
        answers = [replaced.get(answer.request_id, answer) for answer in answers]
        resent += len(again)
    return answers, total, resent


@dataclass(frozen=True)
class Answerer:
    """One model's answers through the one path: the request cache first, then its engine, chunk by chunk.

    ``engine()`` is called only when something must be sent; ``model_fingerprint`` None turns the
    cache off (everything is sent, nothing kept).
    """

    model_id: str
    engine: Callable[[], Engine]
    warehouse: Warehouse
    model_fingerprint: str | None
    chunk_size: int
    commit_interval_s: float = 10.0
    precision: DtypeChoice | None = None  # the dtype the answers are computed in here (engines/precision.py)

    def answer_frame(self, prompts: pl.DataFrame, *, retries: int) -> tuple[pl.DataFrame, AnswerStats]:
        """``answer_frame`` for this model: the responses frame of a partition's prompt rows."""
        return answer_frame(
            prompts,
            engine=self.engine,
            warehouse=self.warehouse,
            model_id=self.model_id,
            model_fingerprint=self.model_fingerprint,
            chunk_size=self.chunk_size,
            retries=retries,
            commit_interval_s=self.commit_interval_s,
        )

    def answer(self, requests: Sequence[Request], *, retries: int) -> tuple[list[Response], AnswerStats]:
        """One response per request, in order, with the cache and the per-chunk commits; no stage table written."""
        prompts = to_frame("prompts", list(requests), model=self.model_id, task="")
        answers, stats = self.answer_frame(prompts, retries=retries)
        return from_frame("responses", answers, Response), stats


Answerers = Callable[[str], Answerer]
"""The answering path of any registered model, by model id: how a stage reaches a judge's engine."""
