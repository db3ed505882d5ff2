"""The lm-eval bridge: lm-eval builds requests and scores them, our engine answers.

Checked against the native `crows_pairs` task (same requests, same metrics), against
lm-eval's own request building, and by hand on tiny local tasks (generate_until with a
regex filter and few-shot, loglikelihood_rolling with a non-mean aggregation).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import MIRROR, SETTINGS, make_resources, requires_mirror, write_overrides
from themis_dagster.engines.dispatch import dispatch
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.errors import ConfigError
from themis_dagster.lm_eval_bridge import conversions
from themis_dagster.lm_eval_bridge import utils as bridge
from themis_dagster.lm_eval_bridge.utils import Params
from themis_dagster.tasks.loader import LoadedTask, load_task
from themis_dagster.tasks.spec import Item, Request, Response, TaskInputs

CROWS = {"crows_pairs_anonymized.csv": MIRROR / "crows_pairs" / "crows_pairs_anonymized.csv"}
INPUTS = TaskInputs(datasets_dir=SETTINGS.datasets_dir, cache_dir=SETTINGS.cache_dir)  # as the stages hand them
ODD_REPLIES = ["", "   \n\t", "数字は四十二です 🙂", "x" * 20_000, "None", "null", "\x00\x01", "NaN"]


def _answer(engine: FakeEngine, requests: list[Request]) -> list[Response]:
    answers, _ = dispatch(engine, requests)
    return [Response(a.request_id, a.item_id, a.logprob, a.is_greedy, a.text, a.error) for a in answers]


def _run(task: LoadedTask, responses: Any = None) -> tuple[list[Item], list[Request], Any, Any]:
    task = task.with_inputs(INPUTS)  # judge and compute_metrics rebuild the task: its data files through these
    items = task.module.load_items(CROWS, task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    answered = responses(requests) if responses else _answer(FakeEngine(), requests)
    judged = task.module.judge(items, requests, answered, task.params)
    return items, requests, judged, task.module.compute_metrics(judged, task.params)


@requires_mirror
def test_crows_pairs_bridge_equals_native_task() -> None:
    """Same 50 pairs, same (context, continuation) requests, same loglikelihoods -> same metrics."""
    ours = load_task("lm_eval_crows_pairs", {"limit": 50})
    native = load_task("crows_pairs", {"limit": 50})
    b_items, b_requests, b_judged, b_metrics = _run(ours)
    n_items, n_requests, n_judged, n_metrics = _run(native)
    assert len(b_items) == 50 and [i.item_id for i in b_items] == [i.item_id for i in n_items]
    assert [(r.context, r.continuation) for r in b_requests] == [(r.context, r.continuation) for r in n_requests]
    assert all(r.request_type == "loglikelihood" and r.template == "crows_pairs_mirror" for r in b_requests)
    assert [j.score for j in b_judged] == [j.score for j in n_judged]
    assert [j.detail["metrics"]["likelihood_diff"] for j in b_judged] == [j.detail["likelihood_diff"] for j in n_judged]
    ours_by_key = {(m.subset, m.metric): m for m in b_metrics}
    native_by_key = {(m.subset, m.metric): m for m in n_metrics}
    assert set(ours_by_key) == set(native_by_key)  # headline + every bias type, both metrics
    for key in (None, "pct_stereotype"), (None, "likelihood_diff"):
        assert ours_by_key[key].value == native_by_key[key].value  # exact, not approx
        assert ours_by_key[key].n == 50
    assert ours_by_key == native_by_key  # CIs too: same seed, same per-doc values


@requires_mirror
def test_crows_pairs_hand_worked_metrics() -> None:
    """Four pairs with chosen loglikelihoods (ll_more, ll_less):
    doc0 (-10, -12) stereo, |d|=2; doc1 (-20, -15) not, 5; doc2 (-7, -8) stereo, 1; doc3 (-9, -9) tie -> not, 0.
    pct_stereotype = 2/4 = 0.5 (lm-eval: acc = 1.0 if ll1 > ll2), likelihood_diff = 8/4 = 2.0."""
    task = load_task("lm_eval_crows_pairs", {"limit": 4})
    lls = {"0": (-10.0, -12.0), "1": (-20.0, -15.0), "2": (-7.0, -8.0), "3": (-9.0, -9.0)}

    def hand(requests: list[Request]) -> list[Response]:
        return [Response(r.request_id, r.item_id, lls[r.item_id][int(r.request_id[-1])], False) for r in requests]

    _, _, judged, metrics = _run(task, hand)
    assert [j.score for j in judged] == [1.0, 0.0, 1.0, 0.0]
    values = {(m.subset, m.metric): m for m in metrics}
    assert values[(None, "pct_stereotype")].value == 0.5
    assert values[(None, "likelihood_diff")].value == 2.0
    low, high = values[(None, "likelihood_diff")].ci_low, values[(None, "likelihood_diff")].ci_high
    assert low is not None and high is not None and 0.0 <= low <= 2.0 <= high <= 5.0


@requires_mirror
def test_instances_are_lm_evals_own(tmp_path: Path) -> None:
    """The stored instances equal what lm-eval's Task.build_all_requests makes for the same docs."""
    params = load_task("lm_eval_crows_pairs", {"limit": 7}).params
    items = bridge.load_items(CROWS, params)  # type: ignore[arg-type]
    task = bridge.build_task(params, CROWS)  # type: ignore[arg-type]
    task.build_all_requests(limit=7)
    theirs = [(i.doc_id, i.idx, list(i.args)) for i in task.instances]
    ours = [
        (r["doc_id"], q["idx"], q["arguments"]) for r in (i.fields["__lm_eval__"] for i in items) for q in r["requests"]
    ]
    assert ours == theirs


@requires_mirror
def test_missing_and_failed_responses_are_unparsed() -> None:
    task = load_task("lm_eval_crows_pairs", {"limit": 4})

    def broken(requests: list[Request]) -> list[Response]:
        out = [Response("0:0", "0", -1.0), Response("0:1", "0", -2.0, True)]  # doc 0 complete
        out += [Response("1:0", "1", None, error="engine died"), Response("1:1", "1", -1.0)]
        out += [Response("2:0", "2", float("nan")), Response("2:1", "2", -1.0)]
        return out  # doc 3: nothing at all

    _, _, judged, metrics = _run(task, broken)
    assert [(j.outcome, j.parsed) for j in judged] == [
        ("scored", True),
        ("engine_error", False),
        ("non_finite_logprob", False),
        ("missing_response", False),
    ]
    headline = {m.metric: m for m in metrics if m.subset is None}
    assert headline["pct_stereotype"].value == 1.0 and headline["pct_stereotype"].n == 1
    assert headline["likelihood_diff"].value == 1.0


def _registry_crows(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval's registry crows_pairs_english reads the hub copy; serve the mirror CSV instead."""
    import datasets
    import pandas as pd

    real = datasets.load_dataset

    def fake(path: str, name: str | None = None, **kwargs: Any) -> Any:
        if path == "jannalu/crows_pairs_multilingual":
            frame = pd.read_csv(CROWS["crows_pairs_anonymized.csv"], dtype=str, keep_default_na=False)
            return datasets.DatasetDict({"test": datasets.Dataset.from_pandas(frame)})
        return real(path, name=name, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", fake)


@requires_mirror
def test_registry_name_task_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry name resolves through lm-eval's own task index (its YAML and utils).

    Registry tasks read their data from the Hugging Face hub, which tests cannot reach, so
    the hub dataset is served from the mirror here; with internet the same params just work.
    """
    _registry_crows(monkeypatch)
    params = Params(lm_eval_task="crows_pairs_english", limit=5, subset_field="bias_type")
    items = bridge.load_items({}, params)
    local = bridge.load_items(CROWS, Params(task_yaml=load_task("lm_eval_crows_pairs").params.task_yaml, limit=5))  # type: ignore[attr-defined]
    assert [i.fields["__lm_eval__"]["task"] for i in items[:1]] == ["crows_pairs_english"]
    assert [i.subset for i in items] == [i.fields["bias_type"] for i in local]
    ours = bridge.build_requests(items, params, {})
    assert [(r.context, r.continuation) for r in ours] == [
        (r.context, r.continuation) for r in bridge.build_requests(local, params, {})
    ]
    judged = bridge.judge(items, ours, _answer(FakeEngine(), ours), params)
    assert {m.metric for m in bridge.compute_metrics(judged, params)} == {"likelihood_diff", "pct_stereotype"}


TINY_DATA = [
    {"question": "2 + 2", "answer": "4"},
    {"question": "3 + 4", "answer": "7"},
    {"question": "10 - 1", "answer": "9"},
    {"question": "6 * 7", "answer": "42"},
]
TINY_TRAIN = [{"question": "1 + 1", "answer": "2"}, {"question": "5 + 5", "answer": "10"}]

GENERATE_YAML = """
task: tiny_arith_gen
dataset_path: json
dataset_kwargs:
  data_files:
    train: "{train}"
    test: "{test}"
training_split: train
test_split: test
fewshot_split: train
output_type: generate_until
doc_to_text: "Q: {{{{question}}}}\\nA:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n", "Q:"]
  max_gen_toks: 12
  do_sample: false
filter_list:
  - name: get-answer
    filter:
      - function: regex
        regex_pattern: "(-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

STRICT_YAML = """
include: tiny_arith_gen.yaml
task: tiny_arith_strict
filter_list:
  - name: none
    filter:
      - function: take_first
process_results: !function utils.strict
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""

STRICT_UTILS = '''
def strict(doc, results):
    """Raises on a reply that is not a bare integer (task code meeting odd output)."""
    return {"exact_match": float(int(results[0].strip()) == int(doc["answer"]))}
'''

ROLLING_YAML = """
task: tiny_rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: "{test}"
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: bits_per_byte
"""


@pytest.fixture
def tiny_tasks(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    test, train, text = folder / "test.jsonl", folder / "train.jsonl", folder / "text.jsonl"
    test.write_text("".join(json.dumps(row) + "\n" for row in TINY_DATA))
    train.write_text("".join(json.dumps(row) + "\n" for row in TINY_TRAIN))
    text.write_text(json.dumps({"text": "one two three"}) + "\n" + json.dumps({"text": "four five"}) + "\n")
    (folder / "tiny_arith_gen.yaml").write_text(GENERATE_YAML.format(train=train, test=test))
    (folder / "tiny_arith_strict.yaml").write_text(STRICT_YAML)
    (folder / "utils.py").write_text(STRICT_UTILS)
    (folder / "tiny_rolling.yaml").write_text(ROLLING_YAML.format(test=text))
    return folder


def test_registry_name_via_include_path(tiny_tasks: Path) -> None:
    """A local task placed on include_path is found by name, as `lm_eval --include_path` finds it."""
    params = Params(lm_eval_task="tiny_arith_gen", include_path=(str(tiny_tasks),), include_defaults=False)
    items = bridge.load_items({}, params)
    assert [i.fields["question"] for i in items] == [row["question"] for row in TINY_DATA]
    with pytest.raises(KeyError, match="not a registered task"):
        bridge.load_items(
            {}, Params(lm_eval_task="no_such_task_x", include_path=(str(tiny_tasks),), include_defaults=False)
        )


def test_generate_until_round_trip(tiny_tasks: Path) -> None:
    """Prompts with a seeded 1-shot context; gen_kwargs mapped; replies cut at `until`, regex-filtered, scored."""
    params = Params(task_yaml=str(tiny_tasks / "tiny_arith_gen.yaml"), num_fewshot=1, seed=7)
    items = bridge.load_items({}, params)
    requests = bridge.build_requests(items, params, {})
    assert requests == bridge.build_requests(bridge.load_items({}, params), params, {})  # same params, same prompts
    assert [r.request_id for r in requests] == ["0:0", "1:0", "2:0", "3:0"]
    first = requests[0]
    assert first.request_type == "generate" and first.prompt is not None
    assert first.prompt.endswith("Q: 2 + 2\nA:") and first.prompt.startswith("Q: ")
    assert first.prompt.count("Q: ") == 2  # one shot from the train split, then the question
    assert first.gen_params == {"max_tokens": 12, "temperature": 0.0, "top_p": 1.0, "seed": 1234, "stop": ["\n", "Q:"]}
    replies = {"0": " 4\nQ: next", "1": "The answer is 7.", "2": "nine", "3": " 41"}
    responses = [Response(r.request_id, r.item_id, text=replies[r.item_id]) for r in requests]
    judged = bridge.judge(items, requests, responses, params)
    assert [j.score for j in judged] == [1.0, 1.0, 0.0, 0.0]
    assert judged[0].detail["filtered_responses"] == ["4"]  # cut at "\n", then the regex's number
    assert judged[2].detail["filtered_responses"] == ["[invalid]"]  # lm-eval regex fallback
    values = {(m.subset, m.metric): m for m in bridge.compute_metrics(judged, params)}
    assert values[(None, "exact_match")].value == 0.5 and values[(None, "exact_match")].n == 4
    assert values[(None, "exact_match")].ci_low is not None  # mean aggregation -> bootstrap CI


def test_generate_odd_replies_never_raise(tiny_tasks: Path) -> None:
    for yaml_name in ("tiny_arith_gen.yaml", "tiny_arith_strict.yaml"):
        params = Params(task_yaml=str(tiny_tasks / yaml_name), limit=1)
        items = bridge.load_items({}, params)
        requests = bridge.build_requests(items, params, {})
        for reply in ODD_REPLIES:
            judged = bridge.judge(items, requests, [Response("0:0", "0", text=reply)], params)
            assert len(judged) == 1
            if yaml_name == "tiny_arith_gen.yaml":
                assert judged[0].parsed and judged[0].score == 0.0
            else:  # int() of a non-number raises inside the task's own process_results
                assert judged[0].outcome == "process_results_error" and not judged[0].parsed
        missing = bridge.judge(items, requests, [Response("0:0", "0", text=None)], params)
        assert missing[0].outcome == "missing_response"
        failed = bridge.judge(items, requests, [Response("0:0", "0", error="boom")], params)
        assert failed[0].outcome == "engine_error" and failed[0].detail["error"] == "boom"
    strict = Params(task_yaml=str(tiny_tasks / "tiny_arith_strict.yaml"), limit=1)
    items = bridge.load_items({}, strict)
    assert bridge.judge(items, [], [Response("0:0", "0", text=" 4 ")], strict)[0].score == 1.0


def test_generate_through_fake_engine_and_gen_kwargs_override(tiny_tasks: Path) -> None:
    params = Params(task_yaml=str(tiny_tasks / "tiny_arith_gen.yaml"), gen_kwargs={"max_gen_toks": 3, "until": "."})
    items = bridge.load_items({}, params)
    requests = bridge.build_requests(items, params, {})
    assert requests[0].gen_params is not None
    assert requests[0].gen_params["max_tokens"] == 3 and requests[0].gen_params["stop"] == ["."]
    engine = FakeEngine(reply=lambda prompt: {"2 + 2": "4", "3 + 4": "7"}.get(prompt[-7:-3].strip(), "0"))
    judged = bridge.judge(items, requests, _answer(engine, requests), params)
    assert [j.outcome for j in judged] == ["scored"] * 4
    assert engine.calls == ["generate:4"]


def test_loglikelihood_rolling_and_non_mean_aggregation(tiny_tasks: Path) -> None:
    """word_perplexity = exp(-sum ll / sum words) (lm-eval weighted_perplexity): no bootstrap CI.
    lls -6 (3 words, 13 bytes) and -4 (2 words, 9 bytes): word_perplexity = exp(10/5) = e^2;
    bits_per_byte = -sum ll / sum bytes / ln 2 = 10 / 22 / ln 2."""
    params = Params(task_yaml=str(tiny_tasks / "tiny_rolling.yaml"))
    items = bridge.load_items({}, params)
    requests = bridge.build_requests(items, params, {})
    assert [(r.request_type, r.context, r.continuation) for r in requests] == [
        ("loglikelihood", "", "one two three"),
        ("loglikelihood", "", "four five"),
    ]
    responses = [Response("0:0", "0", -6.0, False), Response("1:0", "1", -4.0, False)]
    values = {m.metric: m for m in bridge.compute_metrics(bridge.judge(items, requests, responses, params), params)}
    assert values["word_perplexity"].value == pytest.approx(math.exp(2.0))
    assert values["bits_per_byte"].value == pytest.approx(10 / 22 / math.log(2))
    assert values["word_perplexity"].ci_low is None and values["word_perplexity"].n == 2


def test_params_fail_fast_naming_the_field(tiny_tasks: Path) -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        Params()
    with pytest.raises(ValueError, match="exactly one of"):
        Params(lm_eval_task="x", task_yaml=str(tiny_tasks / "tiny_rolling.yaml"))
    with pytest.raises(ValueError, match="task_yaml"):
        Params(task_yaml="no/such/file.yaml")
    with pytest.raises(ValueError, match="num_fewshot"):
        Params(lm_eval_task="x", num_fewshot=-1)
    with pytest.raises(ValueError, match="include_path"):
        Params(lm_eval_task="x", include_path=("/no/such/folder",))
    with pytest.raises(ValueError, match="extra"):
        Params(lm_eval_task="x", fewshot=3)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="limit"):
        load_task("lm_eval_crows_pairs", {"limit": 0})
    gen = str(tiny_tasks / "tiny_arith_gen.yaml")
    with pytest.raises(ValueError, match="filter_name"):
        bridge.load_items({}, Params(task_yaml=gen, filter_name="nope"))
    with pytest.raises(ValueError, match="score_metric"):
        bridge.load_items({}, Params(task_yaml=gen, score_metric="nope"))
    with pytest.raises(ValueError, match="subset_field"):
        bridge.load_items({}, Params(task_yaml=gen, subset_field="nope"))


def test_generation_params_mapping() -> None:
    from themis_dagster.exchange import GenerationParams

    base = GenerationParams(seed=5, top_p=0.9)
    greedy = conversions.generation_params(
        {"until": "\n\n", "max_gen_toks": 20, "temperature": 0.7, "do_sample": False}, base
    )
    assert greedy == GenerationParams(max_tokens=20, temperature=0.0, top_p=0.9, seed=5, stop=("\n\n",))
    sampled = conversions.generation_params({"do_sample": True, "temperature": 0.7, "top_p": 0.5}, base, repeat=2)
    assert sampled == GenerationParams(max_tokens=256, temperature=0.7, top_p=0.5, seed=7, stop=())
    implied = conversions.generation_params({"temperature": 0.3}, base)  # lm-eval: temperature > 0 implies sampling
    assert implied.temperature == 0.3
    assert conversions.generation_params(None, base).max_tokens == conversions.DEFAULT_MAX_GEN_TOKS
    assert conversions.metric_name("pass@1") == "pass_1" and conversions.metric_name("acc,none") == "acc_none"


def _metric_rows(warehouse: Path, task: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute(
            "SELECT subset, metric, value, ci_low, ci_high, n FROM metrics WHERE task = ? "
            "ORDER BY subset NULLS FIRST, metric",
            [task],
        ).fetchall()


@requires_mirror
def test_chain_materializes_and_matches_native_rows(tmp_path: Path, instance: DagsterInstance) -> None:
    from themis_dagster.assets import evaluation_assets, report_assets
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.registry.models import DEFAULT_MODEL_ID

    overrides = write_overrides(
        tmp_path / "o.yaml", {"lm_eval_crows_pairs": {"limit": 30}, "crows_pairs": {"limit": 30}}
    )
    warehouse = tmp_path / "w.duckdb"
    resources = make_resources(warehouse, overrides)
    instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
    for task in ("lm_eval_crows_pairs", "crows_pairs"):
        result = materialize(
            [*evaluation_assets, *report_assets],
            partition_key=evaluation_key(DEFAULT_MODEL_ID, task),
            resources=resources,
            instance=instance,
            selection=[a.key for a in evaluation_assets],
        )
        assert result.success
    ours, native = _metric_rows(warehouse, "lm_eval_crows_pairs"), _metric_rows(warehouse, "crows_pairs")
    assert len(ours) > 2 and ours == native
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        counts = conn.execute(
            "SELECT count(*) FROM prompts WHERE task = 'lm_eval_crows_pairs' AND template = 'crows_pairs_mirror'"
        ).fetchone()
    assert counts == (60,)
