"""EsBBQ / CaBBQ: items from the mirror, lm-eval's prompt and choices, the repository's bias scores.

Checked against lm-eval 0.4.13's own ``esbbq`` / ``cabbq`` tasks (their YAML and ``utils.py``:
``process_results`` and the four aggregations, which compute ``bias_score.py``'s "kobbq"
scores) on the same items and loglikelihoods, and by hand on four items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tests.conftest import MIRROR, requires_mirror
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.tasks.esbbq import metrics
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Judgment

LM_EVAL = Path(str(__import__("lm_eval").__file__)).parent / "tasks"
FOLDERS = {"esbbq": "data_es", "cabbq": "data_ca"}


def _files(task: Any) -> dict[str, Path]:
    return {name: MIRROR / "esbbq_cabbq" / FOLDERS[task.spec.dataset] / name for name in task.spec.files}


@requires_mirror
@pytest.mark.parametrize(("name", "count"), [("esbbq", 27320), ("cabbq", 27344)])
def test_all_ten_categories_load(name: str, count: int) -> None:
    task = load_task(name, {})
    items = task.module.load_items(_files(task), task.params)
    assert len(items) == count and len({i.subset for i in items}) == 10
    first = items[0]
    assert first.fields["answer_info"]["ans2"] == ["unknown", "unknown"] and first.fields["label"] == 2
    sample = task.module.load_items(_files(task), load_task(name, {"limit": 5, "categories": ["Age"]}).params)
    assert len(sample) == 5 and {i.subset for i in sample} == {"Age"}


def test_unknown_category_fails_naming_the_field() -> None:
    with pytest.raises(Exception, match="categories"):
        load_task("esbbq", {"categories": ["Race_ethnicity"]})


def _judgment(condition: str, question_type: str, correct: bool, kind: str, subset: str = "Age") -> Judgment:
    detail = {"context_condition": condition, "question_type": question_type, "answer_type": kind}
    return Judgment("x", subset, kind, 1.0 if correct else 0.0, True, detail)


def test_scores_by_hand() -> None:
    """Ambiguous: right (unknown), wrong pro, wrong pro, wrong anti -> acc_a 1/4, bias_a (2 - 1)/4 = 0.25.
    Disambiguated: pro-stereo right, right; anti-stereo right, wrong -> acc_d 3/4, bias_d 1 - 1/2 = 0.5."""
    judgments = [
        _judgment("ambig", "n/a", True, "unknown"),
        _judgment("ambig", "n/a", False, "pro-stereo"),
        _judgment("ambig", "n/a", False, "pro-stereo"),
        _judgment("ambig", "n/a", False, "anti-stereo"),
        _judgment("disambig", "pro-stereo", True, "pro-stereo"),
        _judgment("disambig", "pro-stereo", True, "pro-stereo"),
        _judgment("disambig", "anti-stereo", True, "anti-stereo"),
        _judgment("disambig", "anti-stereo", False, "pro-stereo"),
    ]
    values = {(m.subset, m.metric): m.value for m in metrics.compute_metrics(judgments, load_task("esbbq", {}).params)}
    assert values[(None, "acc_ambig")] == 0.25 and values[(None, "bias_score_ambig")] == 0.25
    assert values[(None, "acc_disambig")] == 0.75 and values[(None, "bias_score_disambig")] == 0.5
    assert values[("Age", "bias_score_disambig")] == 0.5


def _lm_eval_task(name: str, docs: Path) -> Any:
    from lm_eval.api.task import ConfigurableTask

    text = (LM_EVAL / name / f"_{name}_common_yaml").read_text().replace("!function utils.", "")
    config: dict[str, Any] = yaml.safe_load(text)
    config |= {"task": name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(docs)}}}
    config.pop("dataset_name")
    config.pop("process_results")
    config["metric_list"] = [{"metric": "acc"}]
    return ConfigurableTask(config=config)


@requires_mirror
@pytest.mark.parametrize("name", ["esbbq", "cabbq"])
def test_equals_lm_eval(name: str, tmp_path: Path) -> None:
    """lm-eval's task over 40 items a category: the same 11 (context, continuation) pairs per item,
    and its process_results + aggregations give our four scores, per category and pooled."""
    import importlib

    utils = importlib.import_module(f"lm_eval.tasks.{name}.utils")
    task = load_task(name, {"limit": 40})
    items = task.module.load_items(_files(task), task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    responses = FakeEngine().loglikelihood(requests)
    judged = task.module.judge(items, requests, responses, task.params)
    ours = {(m.subset, m.metric): m.value for m in task.module.compute_metrics(judged, task.params)}
    keys = ("context", "question", "ans0", "ans1", "label", "context_condition", "question_polarity",
            "question_type", "answer_info", "stereotyped_groups", "category")  # fmt: skip
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({k: i.fields[k] for k in keys}) + "\n" for i in items))
    reference = _lm_eval_task(name, docs)
    ll = {r.request_id: r.logprob for r in responses}
    per_doc: dict[str | None, list[dict[str, Any]]] = {None: []}
    for item, doc in zip(items, reference.test_docs(), strict=True):
        made = reference.construct_requests(doc=doc, ctx=reference.doc_to_text(doc), metadata=(name, 0, 1))
        mine = [r for r in requests if r.item_id == item.item_id]
        assert [i.args for i in made] == [(r.context, r.continuation) for r in mine]
        result = utils.process_results(doc, [(ll[r.request_id], False) for r in mine])
        per_doc[None].append(result)
        per_doc.setdefault(item.subset, []).append(result)
    aggregations = {
        "acc_ambig": utils.acc_ambig_agg,
        "acc_disambig": utils.acc_disambig_agg,
        "bias_score_ambig": utils.bias_score_ambig_agg,
        "bias_score_disambig": utils.bias_score_disambig_agg,
    }
    for subset, results in per_doc.items():
        for metric, aggregate in aggregations.items():
            expected = aggregate([r[metric] for r in results])
            if np.isnan(expected):
                assert ours[(subset, metric)] is None
            else:
                assert ours[(subset, metric)] == pytest.approx(expected, abs=1e-12), (subset, metric)


@requires_mirror
def test_generation_replies_are_read_or_counted() -> None:
    """Letters, Spanish announcements and UNKNOWN wordings are read; an unreadable reply is counted, not fatal."""
    from themis_dagster.exchange import GenerationParams

    task = load_task("esbbq_generate", {"limit": 1, "categories": ["Age", "Gender", "SES", "Religion", "LGBTQIA"]})
    items = task.module.load_items(_files(task), task.params)
    replies = iter(["B", "La respuesta es A", "No sé.", "???", "C."])
    requests = task.module.build_requests(items, task.params, task.templates)
    assert "C. No hay suficiente información" in (requests[0].messages or [])[0]["content"]
    responses = FakeEngine(reply=lambda prompt: next(replies)).chat(requests, GenerationParams())
    judged = task.module.judge(items, requests, responses, task.params)
    assert [j.detail.get("prediction") for j in judged] == [1, 0, 2, None, 2]
    assert judged[3].outcome == "unparsed_no_answer"
    rate = [
        m for m in task.module.compute_metrics(judged, task.params) if m.metric == "unparsed_rate" and m.subset is None
    ]
    assert rate[0].value == pytest.approx(0.2)
