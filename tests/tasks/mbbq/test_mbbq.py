"""MBBQ: mbbq.py's answer locations and per-answer score, the paper's bias scores, control accuracy.

Hand-worked on fixture rows written in the repository's JSON-lines schema, and loaded from the
mirror (parallel samples across languages, the F/M/low SES mappings, rows without one target).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MIRROR, requires_mirror
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.mbbq import data, generate_utils, metrics
from themis_dagster.tasks.measures import Ratio
from themis_dagster.tasks.spec import Response


def _row(
    example_id: int, polarity: str, condition: str, groups: list[str], stereotyped: list[str], label: int
) -> dict[str, Any]:
    names = ["Ana", "Bo", "Unknown"]
    return {
        "example_id": example_id, "question_index": "1", "question_polarity": polarity,
        "context_condition": condition, "category": "Age",
        "answer_info": {f"ans{k}": [names[k], group] for k, group in enumerate(groups)},
        "additional_metadata": {"subcategory": "None", "stereotyped_groups": stereotyped, "version": "a", "source": ""},
        "context": f"context {example_id}", "question": "Who?", "ans0": "Ana", "ans1": "Bo", "ans2": "Unknown",
        "label": label,
    }  # fmt: skip


def test_answer_locations_as_mbbq_py() -> None:
    """Target = the answer of a stereotyped group (after the F/M/low SES mapping); two targets -> none."""
    row = _row(0, "neg", "ambig", ["F", "M", "unknown"], ["F"], 2)
    assert data.answer_locations(row, "Gender_identity") == (0, 2)
    row = _row(0, "neg", "ambig", ["lowSES", "highSES", "unknown"], ["low SES"], 2)
    assert data.answer_locations(row, "SES") == (0, 2)
    row = _row(0, "neg", "ambig", ["woman", "girl", "unknown"], ["F"], 2)
    assert data.answer_locations(row, "Gender_identity") == (None, 2)
    assert data.biased_location("neg", 0, 2) == 0 and data.biased_location("nonneg", 0, 2) == 1
    assert [metrics.mbbq_score(p, 0, 2) for p in (0, 1, 2)] == [1, -1, 0]
    assert metrics.mbbq_score(1, None, 2) == -1  # mbbq.py's target_loc 100


def _fixture(tmp_path: Path) -> dict[str, Path]:
    """Age in English: 4 bias rows (target Ana = old) and 2 control rows; every other file empty."""
    old = ["old", "nonOld", "unknown"]
    bias = [
        _row(0, "neg", "ambig", old, ["old"], 2),  # model picks 0 = target = biased   -> +1
        _row(1, "nonneg", "ambig", old, ["old"], 2),  # picks 0 = target = counter-biased -> -1
        _row(2, "neg", "disambig", old, ["old"], 0),  # biased context, picks 0: right
        _row(3, "nonneg", "disambig", old, ["old"], 0),  # counter-biased context (biased = 1), picks 0: right
    ]
    control = [_row(0, "neg", "ambig", old, ["old"], 2), _row(1, "neg", "disambig", old, ["old"], 1)]
    files = {}
    for category in data.CATEGORIES:
        for split in ("bias", "control"):
            name = data.file_name(category, split, "en")
            rows = (bias if split == "bias" else control) if category == "Age" else []
            (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
            files[name] = tmp_path / name
    return files


def test_scores_by_hand(tmp_path: Path) -> None:
    """The model always picks answer 0 (Ana, old).
    bias_ambig: (+1 - 1) / 2 = 0. bias_disambig: biased contexts 1/1 right, counter-biased 1/1 right -> 0.
    acc_ambig 0/2, acc_disambig 2/2; control: ambig 0/1 (UNKNOWN is 2), disambig 0/1 (answer 1)."""
    task = load_task("mbbq", {"languages": ["en"], "categories": ["Age"]})
    items = task.module.load_items(_fixture(tmp_path), task.params)
    assert [i.item_id for i in items][:2] == ["en:Age:bias:0", "en:Age:bias:1"] and len(items) == 6
    requests = task.module.build_requests(items, task.params, task.templates)
    assert requests[0].context == "Context: context 0\nQuestion: Who?\nAnswer:" and requests[0].continuation == " Ana"
    responses = [
        Response(r.request_id, r.item_id, logprob=-1.0 if r.request_id.endswith("ans0") else -5.0) for r in requests
    ]
    judged = task.module.judge(items, requests, responses, task.params)
    assert [j.outcome for j in judged[:4]] == ["biased", "counter_biased", "biased", "counter_biased"]
    assert [j.detail["mbbq_score"] for j in judged[:4]] == [1, 1, 1, 1]
    values = {(m.subset, m.metric): m.value for m in task.module.compute_metrics(judged, task.params)}
    for subset in (None, "en", "en/Age"):
        assert values[(subset, "bias_ambig")] == 0.0 and values[(subset, "bias_disambig")] == 0.0
        assert values[(subset, "acc_ambig")] == 0.0 and values[(subset, "acc_disambig")] == 1.0
        assert values[(subset, "control_acc_ambig")] == 0.0 and values[(subset, "control_acc_disambig")] == 0.0
    # a missing score is recorded and left out, never a crash
    judged = task.module.judge(items, requests, responses[1:], task.params)
    assert judged[0].outcome == "missing_response" and not judged[0].parsed


def test_bias_scores_by_hand() -> None:
    """Ambiguous: biased, biased, counter, unknown -> (2 - 1) / 4 = 0.25.
    Disambiguated: biased contexts right, right; counter-biased right, wrong -> 1 - 0.5 = 0.5 (CI brackets it)."""
    from themis_dagster.tasks.spec import Judgment

    def j(condition: str, outcome: str, label: int, correct: bool) -> Judgment:
        detail = {"split": "bias", "context_condition": condition, "biased_loc": 0, "label": label, "language": "nl"}
        return Judgment("x", "nl/Age", outcome, 1.0 if correct else 0.0, True, detail)

    judged = [j("ambig", "biased", 2, False), j("ambig", "biased", 2, False), j("ambig", "counter_biased", 2, False),
              j("ambig", "unknown", 2, True), j("disambig", "biased", 0, True), j("disambig", "biased", 0, True),
              j("disambig", "counter_biased", 1, True), j("disambig", "biased", 1, False)]  # fmt: skip
    rows = {(m.subset, m.metric): m for m in metrics.compute_metrics(judged, load_task("mbbq", {}).params)}
    assert rows[("nl", "bias_ambig")].value == 0.25 and rows[("nl/Age", "bias_disambig")].value == 0.5
    low, high = rows[(None, "bias_ambig")].ci_low, rows[(None, "bias_ambig")].ci_high
    assert low is not None and high is not None and low <= 0.25 <= high
    assert (None, "control_acc_ambig") not in rows  # no control rows: no control metric
    measure = metrics.PAIRED_METRICS["bias_disambig"]
    assert isinstance(measure, Ratio) and measure.statistic([("biased", 1.0), ("counter_biased", 0.0), None]) == 1.0


@pytest.mark.parametrize(
    ("override", "field"), [({"languages": ["fr"]}, "languages"), ({"categories": ["Religion"]}, "categories")]
)
def test_unknown_language_or_category_fails_naming_the_field(override: dict[str, Any], field: str) -> None:
    with pytest.raises(Exception, match=field):
        load_task("mbbq", override)


@requires_mirror
def test_mirror_sample_is_parallel_across_languages() -> None:
    """A seeded sample takes the same rows in every language; 16 Turkish Gender_identity rows have no target."""
    task = load_task("mbbq", {"limit": 6})
    files = {name: MIRROR / "mbbq" / "data" / name for name in task.spec.files}
    items = task.module.load_items(files, task.params)
    assert len(items) == 4 * 6 * 2 * 6
    by_language: dict[str, list[int]] = {}
    for item in items:
        by_language.setdefault(item.fields["language"], []).append(item.fields["example_id"])
    assert len({tuple(ids) for ids in by_language.values()}) == 1
    gender = task.module.load_items(files, load_task("mbbq", {"languages": ["tr"], "categories": ["Gender_identity"],
                                                              "control": False}).params)  # fmt: skip
    assert len(gender) == 544 and sum(i.fields["target_loc"] is None for i in gender) == 16
    requests = task.module.build_requests(items[-3:], task.params, task.templates)
    assert (requests[0].context or "").startswith("Bağlam: ") and FakeEngine().loglikelihood(requests)


def test_generation_replies_are_read_or_counted(tmp_path: Path) -> None:
    """A letter, an announced letter, the UNKNOWN text and an unreadable reply: three read, one counted."""
    from themis_dagster.exchange import GenerationParams

    task = load_task("mbbq_generate", {"languages": ["en"], "categories": ["Age"], "control": False})
    items = task.module.load_items(_fixture(tmp_path), task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    assert "A. Ana\nB. Bo\nC. Unknown" in (requests[0].messages or [])[0]["content"]
    replies = iter(["A", "The answer is (B).", "Unknown", "???"])
    responses = FakeEngine(reply=lambda prompt: next(replies)).chat(requests, GenerationParams())
    judged = task.module.judge(items, requests, responses, task.params)
    assert [j.detail.get("prediction") for j in judged] == [0, 1, 2, None]
    assert [j.outcome for j in judged] == ["biased", "biased", "unknown", "unparsed_no_answer"]
    values = {(m.subset, m.metric): m.value for m in task.module.compute_metrics(judged, task.params)}
    assert values[(None, "unparsed_rate")] == 0.25 and values[(None, "bias_ambig")] == 1.0
    assert values[("en/Age", "acc_disambig")] == 0.0 and all(j.refused is not None for j in judged)
    assert generate_utils.english_announcements("Het antwoord is B") == "Het answer is B"
