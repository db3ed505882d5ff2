"""``iat_weat``: hand-worked vectors through judge and metrics, missing and split words, the asset graph
on the fake engine, and one real run of the default model's own vectors (marker ``engine``)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import SETTINGS, make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets, report_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.dispatch import dispatch
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.stats.weat import WEAT_RESAMPLING, weat
from themis_dagster.tasks.iat import weat_utils
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Item, Request, Response

IAT_DIR = SETTINGS.datasets_dir / "iat"
FILES = {name: IAT_DIR / name for name in ("iat_stimuli.csv", "iat_stimuli_synonym.csv")}
FAST = {"bootstrap_resamples": 200, "permutation_resamples": 200}

# the hand-worked set of tests/stats/test_weat_stats.py: d = sqrt(3/2), 6 partitions, p = 0
HAND = {"x": {"king": [1.0, 0.0], "duke": [1.0, 1.0]}, "y": {"queen": [0.0, 1.0], "lady": [1.0, 1.0]},
        "a": {"good": [1.0, 0.0]}, "b": {"bad": [0.0, 1.0]}}  # fmt: skip


def _hand_item() -> Item:
    fields = {"category": "gender", "set": "gender/hand", **{role: list(words) for role, words in HAND.items()}}
    return Item("weat:main:gender/hand", "gender/hand", fields)


def _answers(item: Item, requests: list[Request], tokens: dict[str, list[str]] | None = None) -> list[Response]:
    vectors = {word: vector for words in HAND.values() for word, vector in words.items()}
    return [
        r.embedded({"input": vectors[r.prompt or ""], "hidden_mean": vectors[r.prompt or ""]},
                   (tokens or {}).get(r.prompt or "", [r.prompt or ""]))
        for r in requests
    ]  # fmt: skip


def test_hand_worked_vectors_through_judge_and_metrics() -> None:
    item = _hand_item()
    params = weat_utils.Params(**FAST)
    requests = weat_utils.build_requests([item], params, {})
    assert [r.request_type for r in requests] == ["embedding"] * 6
    judged = weat_utils.judge([item], requests, _answers(item, requests), params)
    assert judged[0].outcome == "ok" and judged[0].score == pytest.approx(math.sqrt(1.5))
    metrics = {(m.subset, m.metric): m for m in weat_utils.compute_metrics(judged, params)}
    assert metrics[("input:gender/hand", "weat_d")].value == pytest.approx(math.sqrt(1.5))
    assert metrics[("input:gender/hand", "weat_p_value")].value == 0.0
    assert metrics[("input:gender/hand", "weat_p_value")].n == 6
    assert metrics[("input:gender/hand", "weat_p_exact")].value == 1.0
    # WEFAT of "good" (1,0) against X, Y: cos to X = 1, 1/sqrt2; to Y = 0, 1/sqrt2
    cosines = [1.0, 1 / math.sqrt(2), 0.0, 1 / math.sqrt(2)]
    expected = (np.mean(cosines[:2]) - np.mean(cosines[2:])) / np.std(cosines, ddof=1)
    assert metrics[("hidden_mean:gender/hand:good", "wefat")].value == pytest.approx(expected)
    assert metrics[(None, "weat_d")].value == pytest.approx(math.sqrt(1.5))


def test_missing_and_split_words_are_reported_never_raised() -> None:
    item = _hand_item()
    params = weat_utils.Params(split_words="skip", **FAST)
    requests = weat_utils.build_requests([item], params, {})
    answers = _answers(item, requests, tokens={"duke": ["du", "ke"]})
    # every stigma label failed: Y is empty
    answers = [
        Response(a.request_id, a.item_id, error="'queen' has no tokens", request_type="embedding")
        if "|y|" in a.request_id else a
        for a in answers
    ]  # fmt: skip
    judged = weat_utils.judge([item], requests, answers, params)[0]
    assert judged.outcome == "missing_words" and judged.score is None and not judged.parsed
    assert judged.detail["empty_lists"] == ["y"]
    assert judged.detail["left_out"]["duke"] == {"why": "several tokens", "tokens": ["du", "ke"]}
    assert judged.detail["split_words"] == {"duke": ["du", "ke"]}
    assert "no tokens" in judged.detail["left_out"]["queen"]["why"]
    metrics = weat_utils.compute_metrics([judged], params)
    assert {(m.subset, m.metric): m.value for m in metrics}[(None, "weat_word_coverage")] == 0.0


def test_options_are_validated() -> None:
    for field, bad in (("representations", ["output"]), ("split_words", "first"), ("word_list", "both")):
        with pytest.raises(ValueError, match=field):
            weat_utils.Params.model_validate({field: bad})


def test_engine_without_embeddings_fails_the_requests_not_the_run() -> None:
    class NoEmbeddings(Engine):  # Engine.embed's default
        pass

    responses, stats = dispatch(NoEmbeddings(), [Request.embedding("word", "r1", "i1")])
    assert stats.errors == 1 and "computes no embeddings" in (responses[0].error or "")


@requires_mirror
def test_fake_engine_task_on_the_stimuli() -> None:
    task = load_task("iat_weat", {"datasets": ["career", "racism"], **FAST})
    items = task.module.load_items(FILES, task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    assert [item.subset for item in items] == ["race/racism", "gender/career"]
    assert len(requests) == (1 + 1 + 8 + 8) + (5 + 5 + 7 + 7)
    responses, _ = dispatch(FakeEngine(), requests)
    judged = task.module.judge(items, requests, responses, task.params)
    assert all(j.parsed for j in judged)
    # racism has one label per group: d is +-sqrt(2) (two values), no CI, two partitions
    racism = judged[0].detail["results"]["input"]
    assert abs(racism["effect_size"]) == pytest.approx(math.sqrt(2)) and racism["ci_low"] is None
    assert racism["partitions"] == 2
    declared = {m.name for m in task.spec.metrics}
    assert {m.metric for m in task.module.compute_metrics(judged, task.params)} <= declared


@requires_mirror
def test_asset_graph_on_the_fake_engine(tmp_path: Path, instance: DagsterInstance) -> None:
    overrides = write_overrides(tmp_path / "o.yaml", {"iat_weat": {"datasets": ["career", "power"], **FAST}})
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse, overrides)
    instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
    for _ in range(2):  # a re-run replaces its rows
        result = materialize(
            [*evaluation_assets, *report_assets],
            partition_key=evaluation_key(DEFAULT_MODEL_ID, "iat_weat"),
            resources=resources,
            instance=instance,
            selection=[a.key for a in evaluation_assets],
            raise_on_error=False,
        )
        assert result.success
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        responses = conn.execute("SELECT count(*), count(DISTINCT request_type) FROM responses").fetchone()
        rows = conn.execute(
            "SELECT subset, value, ci_low, ci_high FROM metrics WHERE task = ? AND metric = ? ORDER BY subset",
            ["iat_weat", "weat_d"],
        ).fetchall()
    assert responses == ((5 + 5 + 7 + 7) + (4 + 4 + 4 + 4), 1)
    subsets = [row[0] for row in rows]
    assert "input:gender/career" in subsets and "hidden_mean:gender/power" in subsets and None in subsets
    career = next(row for row in rows if row[0] == "hidden_mean:gender/career")
    assert career[2] is not None and career[2] <= career[1] <= career[3]


@pytest.mark.engine
@requires_mirror
def test_default_model_own_vectors() -> None:
    """The default model's weights through transformers: vectors, tokens and a WEAT that recomputes."""
    from themis_dagster.engines.embeddings import TransformersEmbedder
    from themis_dagster.registry.models import load_registry
    from themis_dagster.registry.weights import resolve_weights

    spec = load_registry(SETTINGS.models_file)[DEFAULT_MODEL_ID]
    weights = resolve_weights(spec, SETTINGS.models_dir, SETTINGS.cache_dir)
    embedder = TransformersEmbedder(weights.path)
    task = load_task("iat_weat", {"datasets": ["career", "mental_illness"], **FAST})
    items = task.module.load_items(FILES, task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    responses = embedder.embed(requests)
    assert not any(r.error for r in responses)
    payload = json.loads(responses[0].text or "")
    size = embedder.model.config.hidden_size
    assert len(payload["vectors"]["input"]) == len(payload["vectors"]["hidden_mean"]) == size
    judged = task.module.judge(items, requests, responses, task.params)
    assert all(j.parsed for j in judged)
    # multi-word labels ("obsessive compulsive disorder") are split and pooled, and reported
    assert "obsessive compulsive disorder" in judged[1].detail["split_words"]
    by_id = {r.request_id: r for r in responses}
    item = items[0]

    def matrix(role: str) -> np.ndarray:
        rows = [json.loads(by_id[weat_utils.request_id(item, role, w)].text or "") for w in item.fields[role]]
        return np.array([row["vectors"]["input"] for row in rows])

    again = weat(
        matrix("x"),
        matrix("y"),
        matrix("a"),
        matrix("b"),
        resampling=replace(WEAT_RESAMPLING, n_resamples=200),
        permutation_resamples=200,
    )
    result = judged[0].detail["results"]["input"]
    assert result["effect_size"] == pytest.approx(again.effect_size)
    assert result["p_value"] == again.p_value and 0.0 <= result["p_value"] <= 1.0
    assert result["partitions"] == math.comb(10, 5) and result["exact"]
