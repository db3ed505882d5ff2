"""The chain works in chunks and columnar frames: chunked readers keep order, chunked stages equal whole ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from tests.conftest import make_resources
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.evaluation.answering import answer_frame, answer_requests, chunk_order
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.stage_io import ByItem, chunked, stage_frame
from themis_dagster.evaluation.task_frames import item_local
from themis_dagster.exchange import Request, Response
from themis_dagster.stats import bootstrap_estimate
from themis_dagster.tasks.crows_pairs import utils as crows_pairs
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Item
from themis_dagster.warehouse.frames import from_frame, iter_records, to_frame

ROOT = Path(__file__).resolve().parents[2]


def _requests(n: int) -> list[Request]:
    return [Request.loglikelihood("", f"sentence {i % 7} number {i}", f"r{i}", f"i{i // 2}") for i in range(n)]


def test_iter_records_yields_every_row_once_in_order() -> None:
    requests = _requests(23)
    frame = to_frame("prompts", requests, model="m", task="t")
    chunks = list(iter_records("prompts", frame, Request, 5))
    assert [len(chunk) for chunk in chunks] == [5, 5, 5, 5, 3]
    assert [r for chunk in chunks for r in chunk] == requests


def test_records_with_keyword_only_fields_round_trip() -> None:
    responses = [
        Request.loglikelihood("a", "b", "r0", "i0").scored(-1.5, True, n_prompt_tokens=3, n_continuation_tokens=1)
    ]
    responses.append(Response("r1", "i1", error="boom", request_type="generate", latency_s=0.25))
    assert from_frame("responses", to_frame("responses", responses, model="m", task="t"), Response) == responses


def test_chunked_is_lazy_and_complete() -> None:
    consumed: list[int] = []

    def numbers() -> object:
        for i in range(7):
            consumed.append(i)
            yield i

    chunks = chunked(numbers(), 3)  # type: ignore[arg-type]
    assert next(chunks) == [0, 1, 2] and consumed == [0, 1, 2]
    assert list(chunks) == [[3, 4, 5], [6]]


def test_by_item_lines_rows_up_with_items_whatever_the_table_order() -> None:
    items = pl.DataFrame({"item_id": ["b", "a", "c"]})
    rows = to_frame(
        "prompts",
        [
            Request.loglikelihood("", x, f"{i}:{x}", i)
            for i, x in [("a", "1"), ("c", "1"), ("b", "1"), ("a", "2"), ("z", "1")]
        ],
        model="m",
        task="t",
    )
    lined = ByItem(items, rows)
    assert [r.request_id for r in lined.records("prompts", Request, 0, 3)] == ["b:1", "a:1", "a:2", "c:1"]
    assert [r.request_id for r in lined.records("prompts", Request, 1, 2)] == [
        "a:1",
        "a:2",
    ]  # an item's rows in table order
    assert lined.records("prompts", Request, 3, 3) == []  # z has no item: left out


def test_stage_frame_from_chunks_equals_one_frame() -> None:
    key = EvaluationPartition("m", "t")
    requests = _requests(10)
    assert stage_frame("prompts", key, chunked(requests, 3)).equals(to_frame("prompts", requests, model="m", task="t"))
    assert stage_frame("prompts", key, []).height == 0


def test_crows_pairs_judged_a_chunk_at_a_time_equals_judged_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the judgments stage does for an item-local task, against one call with the whole partition."""
    assert crows_pairs.ITEM_LOCAL
    items = [Item(str(i), "race", {"sent_more": f"more {i}", "sent_less": f"less {i}"}) for i in range(11)]
    params = crows_pairs.Params()
    requests = crows_pairs.build_requests(items, params, {})
    responses = FakeEngine().loglikelihood(list(reversed(requests)))  # the table's order need not be the items'
    whole = crows_pairs.judge(items, requests, responses, params)
    items_frame = to_frame("task_items", items, model="m", task="t", dataset_sha256="s")
    lined = ByItem(items_frame, to_frame("responses", responses, model="m", task="t"))
    by_chunk = []
    for start, batch in zip(range(0, 11, 4), iter_records("task_items", items_frame, Item, 4), strict=True):
        by_chunk += crows_pairs.judge(
            batch, [], lined.records("responses", Response, start, start + len(batch)), params
        )
    assert by_chunk == whole


def test_answer_frame_answers_in_prompt_order_and_resumes_from_the_cache(tmp_path: Path) -> None:
    resources = make_resources(tmp_path / "w.duckdb")
    warehouse = resources["warehouse"]
    requests = _requests(30)
    engine = FakeEngine()
    settings = {"warehouse": warehouse, "model_id": "m", "model_fingerprint": "fp", "retries": 0}
    first, stats = answer_requests(requests[:12], engine=lambda: engine, chunk_size=5, **settings)  # type: ignore[arg-type]
    assert [r.request_id for r in first] == [r.request_id for r in requests[:12]]
    assert (stats.sent, stats.chunks, stats.cached_now) == (12, 3, 12)
    assert engine.calls == ["loglikelihood:5", "loglikelihood:5", "loglikelihood:2"]
    prompts = to_frame("prompts", requests, model="m", task="t")
    answers, again = answer_frame(prompts, engine=lambda: engine, chunk_size=7, **settings)  # type: ignore[arg-type]
    assert answers.get_column("request_id").to_list() == [r.request_id for r in requests]
    assert (again.reused, again.sent, again.chunks) == (12, 18, 3)
    assert from_frame("responses", answers, Response)[:12] == first
    expected = FakeEngine().loglikelihood(requests)
    assert answers.get_column("logprob").to_list() == [r.logprob for r in expected]


def test_answer_frame_sends_in_chunk_order() -> None:
    requests = [
        Request("c", "1", "generate", prompt="zeta", gen_params={"max_tokens": 4}),
        Request("a", "1", "loglikelihood", context="", continuation="b"),
        Request("d", "2", "chat", messages=[{"role": "user", "content": "hi"}], gen_params={"seed": 1}),
        Request("b", "2", "loglikelihood", context="", continuation="a"),
        Request("e", "3", "generate", prompt="alpha", gen_params={"max_tokens": 4}),
    ]
    frame = to_frame("prompts", requests, model="m", task="t").with_row_index("_position")
    from themis_dagster.evaluation.answering import _in_chunk_order

    ordered = _in_chunk_order(frame).get_column("request_id").to_list()
    assert ordered == [r.request_id for r in sorted(requests, key=chunk_order)]


def test_batched_bootstrap_draws_the_same_interval_as_scipy_unbatched(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(7).random(3001)
    monkeypatch.setattr("themis_dagster.stats.BOOTSTRAP_CELLS", 3001 * 64)  # 64 resamples per batch
    ours = bootstrap_estimate(values, n_resamples=1000, seed=1234)
    scipy_ci = stats.bootstrap(
        (values,), np.mean, n_resamples=1000, method="percentile", vectorized=True, rng=np.random.default_rng(1234)
    ).confidence_interval
    assert (ours.ci_low, ours.ci_high) == (float(scipy_ci.low), float(scipy_ci.high))


def test_chain_scale_bench_runs_at_a_thousand_requests() -> None:
    env = {**os.environ, "THEMIS_ENGINE": "fake", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "chain_scale.py"), "--sizes", "1000"],
        env=env, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    assert "us/request" in done.stdout and "peak RSS MiB" in done.stdout
    (results,) = json.loads(done.stdout.split("RESULTS ", 1)[1].splitlines()[0])
    assert results["requests"] == 1000
    assert results["platform_s"] > 0 and results["us_per_request"] > 0 and results["peak_rss_mib"] > 0
    assert set(results["stages_s"]) == {
        "task_dataset",
        "rendered_prompts",
        "raw_responses",
        "judgments",
        "bias_metrics",
    }


def test_item_local_is_opt_in() -> None:
    assert not item_local(load_task("bbq")) and item_local(load_task("crows_pairs"))
