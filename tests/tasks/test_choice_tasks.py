"""The multiple-choice tasks (kinds/choices.py, kinds/lettered.py) ask and judge exactly as they always did.

Each task runs a small fixed sample of the dataset mirror on the fake engine: replies drawn from
a fixed list by the prompt's hash (letters, announcements in each language, choice texts, empty
and unreadable replies), some requests failing and some responses missing. The digests pin the
requests (every field, and each request's cache fingerprint), the judgments (every field, as the
warehouse stores ``detail``) and the metric values (to 12 significant digits, so a platform's
last bit of a bootstrap does not count). They were recorded before the tasks were declared on
the shared kind: a change to any prompt byte, request id, judgment or metric fails here.

What was added since is left out before the recorded digests are compared, and pinned apart
(``PROTOCOL``): the two readings every judgment of a task with an official reader keeps (``detail``'s
``reading`` and ``readings``), KoBBQ's out-of-choice ratio per label annotation, and the protocols of
the benchmarks' own code (KoBBQ's three rotations, the official readings), which the recorded runs
ask as before through their parameters (``rotations: 1``, ``reading: themis``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest

from tests.conftest import MIRROR, SETTINGS, requires_mirror
from themis_dagster.datasets import resolve_file
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.engines.fingerprint import request_fingerprint
from themis_dagster.exchange import GenerationParams
from themis_dagster.kinds.choices import ChoiceBenchmark, LikeliestChoice, graded
from themis_dagster.kinds.lettered import LetteredChoice, ReadingParams
from themis_dagster.tasks.bbq.parser import ParsedAnswer
from themis_dagster.tasks.cbbq import data as cbbq_data
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Item, MetricValue, Response, TaskParams

REPLIES = [
    "A", "B", "C", "(b)", "(a)", "Answer: (b)", "The answer is C.", "정답: A", "할머니입니다.", "答案：B",
    "La respuesta es B", "Het antwoord is C", "Cevap: A", "", "???", "the designer", "not enough information",
    "B) The woman", "unknown", "Resposta: C", "A and B", "No lo sé",
]  # fmt: skip
ONCE = {"rotations": 1, "reading": "themis"}  # KoBBQ asked once in the file's order, read the project's way
# task -> (params, digests of requests, judgments, metric values)
GOLDEN: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "bbq": ({"limit": 12}, "6379a9184d1cc4a5", "07aa245abb412d70", "61a895f1ade08c80"),
    "bbq_generate": ({"limit": 12}, "2571873e84ae8c92", "e0128f2daecc3ae6", "24bb1d81195d38df"),
    "esbbq": ({"limit": 6}, "d43afeb7d5590817", "3557695d5c2147c5", "ec5015b73c30e01b"),
    "esbbq_generate": ({"limit": 6}, "86d9026544934760", "9fefe1f68c7c2e3e", "819af26a79fa2d00"),
    "cabbq": ({"limit": 6}, "736cf5f0913b3659", "4c179ef20bc79ba9", "2dd9b44bd5a1b1e7"),
    "cabbq_generate": ({"limit": 6}, "f49ab128f4e146e8", "5563a37ba09e72b0", "8b1b172fdb40900b"),
    "mbbq": ({"limit": 3}, "f802c149fa146f00", "cf0afee2b7fd3870", "389dcec8c77d670d"),
    "mbbq_generate": ({"limit": 3, "reading": "themis"}, "e30561a4602f510a", "5f6c119cd59a45ad", "1891a1d241b4e923"),
    "kobbq": ({"limit": 5}, "43e28527b25b37ea", "f2908711ef92bf3f", "d13caea0a2964089"),
    "kobbq_generate": ({"limit": 5, **ONCE}, "d61106eb55a639ac", "10425d0a954a08c1", "5041b256a34e3b12"),
    "cbbq": ({"limit": 5}, "31459f2e6f3d5a66", "45e1cad2a2e2e32a", "7b9f25bdcdfa9624"),  # holed rows dropped
    "cbbq_generate": ({"limit": 5}, "9ce394d2d8298ab4", "6d0e453033acb8d7", "d7de0ebc89921ef1"),
    "winobias": ({"limit": 15}, "5844d2e38dd36517", "2a6ba98cfca5b100", "8d630ee61403c763"),
    "winobias_chat": ({"limit": 15}, "7aa56c6365ebd04b", "2be899adb0ec0796", "37eb51f9abec6fc8"),
    "winogender": ({}, "df27416122792541", "16ff897c6568126b", "61ad0f20177d8006"),
}
# task -> (params, digests) of what the tasks ask today, beyond the recorded runs: the benchmarks' protocols
PROTOCOL: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "kobbq_generate": ({"limit": 5}, "0117b8c62b55f379", "a4ad910b4e395fc1", "e8745d357d8222af"),
    "mbbq_generate": ({"limit": 3}, "e30561a4602f510a", "edb59f8d61ab31bf", "dedd0b7ce4f3756b"),
    "cbbq_generate": ({"limit": 5, "reading": "official"}, "9ce394d2d8298ab4", "4741728330de6939", "0b9b9778c24b053e"),
}
ADDED_DETAIL = ("reading", "readings")  # kinds/lettered.py: the readings of a task with an official reader


def as_recorded(judgments: list[Any], metrics: list[Any]) -> tuple[list[Any], list[Any]]:
    """The judgments and metric values without what was added since the digests were recorded."""
    kept = [j | {"detail": {k: v for k, v in j["detail"].items() if k not in ADDED_DETAIL}} for j in judgments]
    added = [m for m in metrics if m["metric"] == "ooc_ratio" and str(m["subset"]).startswith("label_annotation:")]
    return kept, [m for m in metrics if m not in added]


def _unit(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def plain(value: object) -> object:
    """A stage record as plain JSON data (dataclasses by field, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def rounded(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metric rows with their floats to 12 significant digits."""
    return [{k: f"{v:.12g}" if isinstance(v, float) else v for k, v in row.items()} for row in metrics]


def run(name: str, overrides: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(requests with their fingerprints, judgments, metric values) of one task on the fake engine."""
    task = load_task(name, {"bootstrap_resamples": 200, **overrides})
    files = {
        file: resolve_file(
            task.spec.dataset, file, datasets_dir=MIRROR, cache_dir=SETTINGS.cache_dir, allow_download=False
        ).path
        for file in task.spec.files
    }
    hooks = task.hooks
    items = hooks.load_items(files, task.params)
    requests = hooks.build_requests(items, task.params, task.templates)
    engine = FakeEngine(
        reply=lambda prompt: REPLIES[_unit(prompt) % len(REPLIES)],
        fail=lambda text: "engine exploded" if _unit("fail" + text) % 17 == 0 else None,
    )
    if task.spec.request_type == "loglikelihood":
        responses = engine.loglikelihood(requests)
    else:
        responses = engine.chat(requests, GenerationParams(**task.params.generation.model_dump()))
    kept = [r for r in responses if _unit("drop" + r.request_id) % 13 != 0]
    judgments = hooks.judge(items, requests, kept, task.params)
    metrics = hooks.compute_metrics(judgments, task.params)
    asked = [dict(plain(request)) | {"fingerprint": request_fingerprint("m", request)} for request in requests]  # type: ignore[call-overload]
    return asked, [plain(j) for j in judgments], [plain(m) for m in metrics]


@requires_mirror
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_requests_judgments_and_metrics_are_those_recorded(name: str) -> None:
    overrides, requests_digest, judgments_digest, metrics_digest = GOLDEN[name]
    requests, judgments, metrics = run(name, overrides)
    official = name in PROTOCOL
    read = [j["detail"].get("parse_rule") is not None for j in judgments]  # a reply was read
    assert [("readings" in j["detail"]) for j in judgments] == [official and was_read for was_read in read]
    judgments, metrics = as_recorded(judgments, metrics)
    assert (digest(requests), digest(judgments), digest(rounded(metrics))) == (
        requests_digest,
        judgments_digest,
        metrics_digest,
    )


@requires_mirror
@pytest.mark.parametrize("name", sorted(PROTOCOL))
def test_the_benchmarks_protocols_are_those_recorded(name: str) -> None:
    """The chat tasks as their benchmarks' code asks and reads them (both readings kept in every judgment)."""
    overrides, requests_digest, judgments_digest, metrics_digest = PROTOCOL[name]
    requests, judgments, metrics = run(name, overrides)
    assert (digest(requests), digest(judgments), digest(rounded(metrics))) == (
        requests_digest,
        judgments_digest,
        metrics_digest,
    )


# CBBQ's digests as recorded before its loader dropped the published rows with an unfilled name marker
# (tasks/cbbq/data.py, ``holed``): with the drop undone they still hold, so the drop is all that changed.
BEFORE_HOLES_DROPPED: dict[str, tuple[dict[str, Any], str, str, str, bool]] = {
    "cbbq": ({"limit": 5}, "bbac1ed18df05859", "458d88cc9c63a3f7", "eeb830901ff5b920", True),
    "cbbq_generate": ({"limit": 5}, "24f67ff935ab31bf", "6e43a60676d1e3e3", "dc062b7923fb1695", True),
    "cbbq_generate official": (
        {"limit": 5, "reading": "official"}, "24f67ff935ab31bf", "964f5b262661e8bc", "16210f80490f3b39", False,
    ),
}  # fmt: skip


@requires_mirror
@pytest.mark.parametrize("case", sorted(BEFORE_HOLES_DROPPED))
def test_cbbqs_only_change_is_the_dropped_holed_rows(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    overrides, requests_digest, judgments_digest, metrics_digest, recorded = BEFORE_HOLES_DROPPED[case]
    monkeypatch.setattr(cbbq_data, "holed", lambda rows, where: (rows, 0))
    requests, judgments, metrics = run(case.split()[0], overrides)
    if recorded:
        judgments, metrics = as_recorded(judgments, metrics)
    assert (digest(requests), digest(judgments), digest(rounded(metrics))) == (
        requests_digest,
        judgments_digest,
        metrics_digest,
    )


# --- the kind itself, on a toy benchmark ------------------------------------------------------

TOY_TEMPLATES = {"ask": "{{ context }} Q: {{ question }} A:", "ask_xx": "xx {{ context }}", "chat": "{{ context }}"}


class ToyParams(TaskParams):
    template: str = "ask"
    target_delimiter: str = " "


def toy_items() -> list[Item]:
    return [
        Item(f"i{n}", "s", {"context": f"c{n}", "question": "q", "options": ["yes", "no", "maybe"], "label": 1})
        for n in range(3)
    ]


def toy_benchmark() -> ChoiceBenchmark:
    return ChoiceBenchmark(
        lambda files, params: toy_items(),
        lambda item, k, extra: graded(item, k, {"k": k} | extra),
        lambda item: {"label": item.fields["label"]},
        lambda judgments, params: [MetricValue(None, "n", float(len(judgments)), None, None, len(judgments))],
    )


def test_likeliest_choice_asks_each_choice_and_takes_the_first_best() -> None:
    task = LikeliestChoice(toy_benchmark(), ToyParams, "options", ids="o{k}")
    items, params = toy_items(), ToyParams()
    requests = task.build_requests(items, params, TOY_TEMPLATES)
    assert [r.request_id for r in requests[:3]] == ["i0:o0", "i0:o1", "i0:o2"]
    assert requests[0].pair == ("c0 Q: q A:", " yes")
    scores = {"i0": [-1.0, -1.0, -2.0], "i1": [-3.0, -1.0, -2.0]}  # a tie goes to the first; i2 has no answers
    responses = [
        r.scored(scores[r.item_id][int(r.request_id[-1])], False, n_prompt_tokens=4, n_continuation_tokens=1)
        for r in requests
        if r.item_id in scores
    ]
    judged = task.judge(items, requests, responses, params)
    assert [(j.outcome, j.detail.get("k")) for j in judged] == [
        ("wrong", 0),
        ("correct", 1),
        ("missing_response", None),
    ]
    assert judged[2].detail == {"label": 1, "loglikelihoods": [None, None, None]}
    quiet = LikeliestChoice(toy_benchmark(), ToyParams, "options", ids="o{k}", missing_scores=False)
    assert quiet.judge(items, requests, responses, params)[2].detail == {"label": 1}


def test_likeliest_choice_groups_items_by_their_template() -> None:
    """A template per item (MBBQ's language) sends each template's items together, in order of first use."""
    items = toy_items()
    task = LikeliestChoice(
        toy_benchmark(), ToyParams, lambda item, params: ["a", "b"], ids=("first", "second"),
        template=lambda item, params: "ask_xx" if item.item_id == "i1" else "ask",
    )  # fmt: skip
    requests = task.build_requests(items, ToyParams(), TOY_TEMPLATES)
    assert [r.request_id for r in requests] == [f"i{n}:{s}" for n in (0, 2, 1) for s in ("first", "second")]
    assert {r.template for r in requests if r.item_id == "i1"} == {"ask_xx"}


def test_lettered_choice_reads_replies_and_counts_the_unread() -> None:
    def read(response: Response, choices: list[str], item: Item, params: Any) -> ParsedAnswer:
        chosen = {"A": 0, "B": 1, "C": 2}.get(response.text or "")
        return ParsedAnswer(chosen, "ok" if chosen is not None else "none", "letter")

    task = LetteredChoice(
        toy_benchmark(), ToyParams, "options", read=read, record_errors=True, unread_metric="unread",
        language=lambda item, params: "en",
    )  # fmt: skip
    items, params = toy_items(), ToyParams(template="chat")
    requests = task.build_requests(items, params, TOY_TEMPLATES)
    assert [r.request_id for r in requests] == ["i0:chat", "i1:chat", "i2:chat"]
    responses = [requests[0].generated("B", "", 1, 1, "stop"), requests[1].failed("boom")]
    judged = task.judge(items, requests, responses, params)
    assert [j.outcome for j in judged] == ["correct", "engine_error", "missing_response"]
    assert judged[0].detail == {"k": 1, "parse_rule": "letter", "reply": "B"}
    assert judged[1].detail == {"label": 1, "error": "boom"} and judged[0].refused is False
    rows = task.compute_metrics(judged, params)
    assert [row.metric for row in rows] == ["n", "unread", "unread"] and rows[1].value == pytest.approx(2 / 3)
    with pytest.raises(ValueError):  # a letter per choice
        LetteredChoice(toy_benchmark(), ToyParams, "options", read=read, letters="AB").build_requests(
            items, params, TOY_TEMPLATES
        )


def test_lettered_choice_keeps_both_readings_and_scores_by_the_declared_one() -> None:
    """An official reader beside ``read``: each judgment of a reply keeps both letters; ``reading`` picks the one
    its outcome follows. A reading's parameter is required of such a task."""

    def letter(response: Response, choices: list[str], item: Item, params: Any) -> ParsedAnswer:
        chosen = {"A": 0, "B": 1, "C": 2}.get((response.text or "")[:1])
        return ParsedAnswer(chosen, "ok" if chosen is not None else "none", "first_letter")

    def last(response: Response, choices: list[str], item: Item, params: Any) -> ParsedAnswer:
        chosen = {"A": 0, "B": 1, "C": 2}.get((response.text or "")[-1:])
        return ParsedAnswer(chosen, "ok" if chosen is not None else "none", "last_letter")

    class ReadParams(ToyParams, ReadingParams):
        pass

    task = LetteredChoice(toy_benchmark(), ReadParams, "options", read=letter, official=last)
    items = toy_items()
    requests = task.build_requests(items, ReadParams(template="chat"), TOY_TEMPLATES)
    responses = [requests[0].generated("B or C", "", 1, 1, "stop"), requests[1].generated("B", "", 1, 1, "stop")]
    official = task.judge(items, requests, responses, ReadParams(template="chat"))
    themis = task.judge(items, requests, responses, ReadParams(template="chat", reading="themis"))
    assert [(j.outcome, j.detail.get("readings")) for j in official] == [
        ("wrong", {"official": "C", "themis": "B"}), ("correct", {"official": "B", "themis": "B"}),
        ("missing_response", None),
    ]  # fmt: skip
    assert [j.outcome for j in themis] == ["correct", "correct", "missing_response"]
    assert (official[0].detail["reading"], themis[0].detail["reading"]) == ("official", "themis")
    assert official[0].detail["parse_rule"] == "last_letter" and themis[0].detail["parse_rule"] == "first_letter"
    with pytest.raises(TypeError, match="reading"):
        LetteredChoice(toy_benchmark(), ToyParams, "options", read=letter, official=last)
