"""A task's columnar functions write exactly the rows its per-record ones do (crows_pairs).

``compute_metrics_frame`` is checked against ``compute_metrics`` on the same judgments: the same
metric rows, estimates and CIs, bit for bit (floats compared by ``float.hex``).

``build_requests`` and ``judge`` are the definitions (lm-eval's doc_to_text/process_results);
``build_requests_frame`` and ``judge_frame`` are the stages' fast paths. Both are run on the
same inputs and the frames the warehouse would store compared text for text.
"""

from __future__ import annotations

import csv
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.task_frames import (
    columnar_items,
    columnar_judge,
    columnar_metrics,
    columnar_requests,
    items_frame,
    judged_frame,
    requests_frame,
)
from themis_dagster.exchange import Request, Response
from themis_dagster.tasks.crows_pairs import utils as crows_pairs
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Item, Judgment, MetricValue
from themis_dagster.warehouse.frames import from_frame, to_frame

KEY = EvaluationPartition("m", "crows_pairs")
PARAMS = crows_pairs.Params()

# logprobs as engines return them, and as they fail: None, NaN, infinities, ties, extremes
LOGPROBS = st.one_of(
    st.none(),
    st.sampled_from([math.nan, -math.inf, math.inf, 0.0, -0.0, -1e-05, -5e-324, -1e300, -12.5]),
    st.floats(min_value=-1e6, max_value=0.0),
)
STEREO = st.one_of(st.none(), st.sampled_from(["stereo", "antistereo"]), st.text(max_size=6))


def _judged_both_ways(pairs: list[tuple[str | None, str | None, float | None, float | None, str]]) -> None:
    items, responses = [], []
    for index, (subset, stereo, more, less, present) in enumerate(pairs):
        fields = {"sent_more": f"more {index}", "sent_less": f"less {index}"}
        if stereo is not None or index % 2:
            fields["stereo_antistereo"] = stereo  # type: ignore[assignment]
        items.append(Item(str(index), subset, fields))
        for side, logprob in (("more", more), ("less", less)):
            if side in present:  # a missing response: judge sees none for that side
                request = Request.loglikelihood("", fields[f"sent_{side}"], f"{index}:{side}", str(index))
                responses.append(
                    request.scored(logprob, True, n_prompt_tokens=3, n_continuation_tokens=2)
                    if logprob is not None
                    else _failed(request)
                )
    by_records = to_frame("judgments", crows_pairs.judge(items, [], responses, PARAMS), model=KEY.model, task=KEY.task)
    by_columns = judged_frame(
        crows_pairs.judge_frame,
        KEY,
        to_frame("task_items", items, model=KEY.model, task=KEY.task, dataset_sha256="sha"),
        to_frame("responses", responses, model=KEY.model, task=KEY.task),
        PARAMS,
    )
    assert by_columns.schema == by_records.schema
    assert by_columns.to_dicts() == by_records.to_dicts()


def _failed(request: Request) -> Response:
    return Response(request.request_id, request.item_id, error="engine failed", request_type=request.request_type)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from(["gender", "race-color"])),
            STEREO,
            LOGPROBS,
            LOGPROBS,
            st.sampled_from(["more less", "more", "less", ""]),
        ),
        max_size=12,
    )
)
def test_judge_frame_equals_judge(pairs: list[tuple[str | None, str | None, float | None, float | None, str]]) -> None:
    _judged_both_ways(pairs)


def test_judge_frame_equals_judge_on_known_cases() -> None:
    _judged_both_ways(
        [
            ("gender", "stereo", -3.5, -4.25, "more less"),  # prefers more
            ("gender", "antistereo", -4.25, -3.5, "more less"),  # prefers less
            ("race-color", "stereo", -2.0, -2.0, "more less"),  # a tie is not a preference for more
            ("race-color", 'quote " and \\ é', -1e-05, -1.2345678901234568e17, "more less"),
            (None, None, math.nan, -1.0, "more less"),  # unusable: missing_response
            ("gender", "stereo", None, -1.0, "more less"),  # an engine error
            ("gender", "stereo", -1.0, -1.0, "more"),  # no response for less
        ]
    )


def test_the_stages_use_crows_pairs_columnar_functions() -> None:
    task = load_task("crows_pairs")
    assert columnar_judge(task) is crows_pairs.judge_frame
    assert columnar_requests(task) is crows_pairs.build_requests_frame
    assert columnar_metrics(task) is crows_pairs.compute_metrics_frame
    assert columnar_items(task) is crows_pairs.load_items_frame


SENTENCE = st.text(max_size=8)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(SENTENCE, SENTENCE, st.one_of(st.none(), SENTENCE)), max_size=10),
    st.sampled_from(["none", "prompts_csv"]),
    st.sampled_from(["", " "]),
)
def test_build_requests_frame_equals_build_requests(
    pairs: list[tuple[str, str, str | None]], context_source: str, delimiter: str
) -> None:
    params = crows_pairs.Params(context_source=context_source, target_delimiter=delimiter)  # type: ignore[arg-type]
    items = []
    for index, (more, less, prompt) in enumerate(pairs):
        fields = {"sent_more": more, "sent_less": less, "stereo_antistereo": "stereo", "bias_type": "age"}
        if prompt is not None or index % 2:
            fields["prompt"] = prompt  # type: ignore[assignment]
        items.append(Item(f"{index}", "age", fields))
    by_records = to_frame("prompts", crows_pairs.build_requests(items, params, {}), model=KEY.model, task=KEY.task)
    frame = to_frame("task_items", items, model=KEY.model, task=KEY.task, dataset_sha256="sha")
    by_columns = requests_frame(crows_pairs.build_requests_frame, KEY, frame, params, {})
    assert by_columns.schema == by_records.schema
    assert by_columns.to_dicts() == by_records.to_dicts()


def test_build_requests_frame_names_an_item_without_its_sentence() -> None:
    items = to_frame(
        "task_items", [Item("7", "age", {"sent_less": "x"})], model=KEY.model, task=KEY.task, dataset_sha256="s"
    )
    with pytest.raises(ValueError, match=r"items \['7'\] have no sent_more"):
        crows_pairs.build_requests_frame(items, PARAMS, {})


def _bits(values: list[MetricValue]) -> list[tuple[object, ...]]:
    """Each metric row with its floats as exact hex text (NaN and -0.0 told apart)."""
    return [tuple(v.hex() if isinstance(v, float) else v for v in vars(value).values()) for value in values]


def _metrics_both_ways(judgments: list[Judgment], params: crows_pairs.Params) -> None:
    stored = to_frame("judgments", judgments, model=KEY.model, task=KEY.task)  # as the warehouse holds them
    by_records = crows_pairs.compute_metrics(from_frame("judgments", stored, Judgment), params)
    by_columns = crows_pairs.compute_metrics_frame(stored, params)
    assert _bits(by_columns) == _bits(by_records)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.sampled_from(["gender", "race-color", "age"])), LOGPROBS, LOGPROBS),
        max_size=40,
    ),
    st.integers(min_value=0, max_value=3),
)
def test_compute_metrics_frame_equals_compute_metrics(
    pairs: list[tuple[str | None, float | None, float | None]], seed: int
) -> None:
    items, responses = [], []
    for index, (subset, more, less) in enumerate(pairs):
        items.append(Item(str(index), subset, {"sent_more": "m", "sent_less": "l", "stereo_antistereo": "stereo"}))
        for side, logprob in (("more", more), ("less", less)):
            request = Request.loglikelihood("", side, f"{index}:{side}", str(index))
            responses.append(
                request.scored(logprob, True, n_prompt_tokens=1, n_continuation_tokens=1)
                if logprob is not None
                else _failed(request)
            )
    judgments = crows_pairs.judge(items, [], responses, PARAMS)
    _metrics_both_ways(judgments, crows_pairs.Params(bootstrap_resamples=100, seed=seed))


def test_compute_metrics_frame_equals_compute_metrics_at_size() -> None:
    """Thousands of pairs, the default 1,000 resamples: CIs drawn by scipy from the same numbers."""
    rng = np.random.default_rng(7)
    subsets = ["gender", "race-color", "age", "religion", None]
    judgments = []
    for index in range(3000):
        more, less = (float(x) for x in -rng.gamma(2.0, 20.0, size=2))
        detail = {"stereo_antistereo": "stereo", "ll_more": more, "ll_less": less, "likelihood_diff": abs(more - less)}
        if index % 97 == 0:  # an unusable pair: left out of both metrics
            judgments.append(Judgment(str(index), subsets[index % 5], "missing_response", None, False, detail))
        else:
            score = 1.0 if more > less else 0.0
            judgments.append(Judgment(str(index), subsets[index % 5], "prefers_sent_more", score, True, detail))
    _metrics_both_ways(judgments, PARAMS)


CELL = st.one_of(st.just(""), st.text(st.characters(blacklist_categories=("Cs",)), max_size=8))


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _loaded_both_ways(rows: list[list[str]], prompts: list[list[str]] | None, limit: int | None) -> None:
    params = crows_pairs.Params(context_source="none" if prompts is None else "prompts_csv", limit=limit)
    with tempfile.TemporaryDirectory() as folder:
        files = {"crows_pairs_anonymized.csv": Path(folder) / "pairs.csv", "prompts.csv": Path(folder) / "prompts.csv"}
        _write_csv(files["crows_pairs_anonymized.csv"], ["", *crows_pairs._KEEP[:4]], rows)
        if prompts is not None:
            _write_csv(files["prompts.csv"], ["", "prompt", "source"], prompts)
        items = crows_pairs.load_items(files, params)
        by_records = to_frame("task_items", items, model=KEY.model, task=KEY.task, dataset_sha256="sha")
        by_columns = items_frame(crows_pairs.load_items_frame, KEY, files, params, "sha")
    assert by_columns.schema == by_records.schema
    assert by_columns.to_dicts() == by_records.to_dicts()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(CELL, CELL, CELL, CELL, CELL, CELL, CELL), max_size=8),
    st.booleans(),
    st.one_of(st.none(), st.integers(min_value=1, max_value=4)),
)
def test_load_items_frame_equals_load_items(
    rows: list[tuple[str, str, str, str, str, str, str]], with_prompts: bool, limit: int | None
) -> None:
    pairs = [[str(index), *row[:4]] for index, row in enumerate(rows)]
    prompts = [[str(index), row[5], row[6]] for index, row in enumerate(rows)] if with_prompts else None
    _loaded_both_ways(pairs, prompts, limit)


def test_load_items_frame_equals_load_items_on_known_cases() -> None:
    _loaded_both_ways(
        [
            ["0", "He was rude.", "She was rude.", "stereo", "gender"],
            ["1", 'A "quote" and \\ back', "caf\u00e9 \u2603 \U0001f600", "antistereo", "race-color"],
            ["", "line\nbreak\ttab", "", "", ""],  # empty cells: NULL, as load_items reads them
        ],
        [["0", "Context:", "src"], ["1", "", "x"], ["2", "\x7f\x1f", ""]],
        None,
    )
