"""A toy chat task for the judging pipeline's step tests: one chat reply per item, a judge model for what
the rules leave open, optionally a panel of judges whose majority is the verdict.

Rules: a reply ``yes`` or ``no`` is parsed; any other reply is left open (``unsure``); a failed reply is an
``engine_error``. The judges answer ``yes`` or ``no`` about an open item; every reply is marked for refusals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from themis_dagster.engines.fake import FakeEngine
from themis_dagster.evaluation.answering import Answerer, Answerers
from themis_dagster.evaluation.judging.pipeline import PartitionReplies
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.exchange import Request, Response
from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.resources import WarehouseResource
from themis_dagster.stats.agreement import majority_verdict
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Item, Judgment, MetricSpec, MetricValue, TaskHooks, TaskParams, TaskSpec
from themis_dagster.warehouse.frames import to_frame

KEY = EvaluationPartition("m", "toy")


class Params(TaskParams):
    judge_model: str | None = None
    panel: tuple[str, ...] = ()
    majority: bool = False


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    return [Item(str(index), "even" if index % 2 == 0 else "odd", {}) for index in range(1, (params.limit or 4) + 1)]


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    return [Request(item.item_id, item.item_id, "chat", messages=[{"role": "user", "content": "?"}]) for item in items]


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    replies = {response.request_id: response for response in responses}
    judged = []
    for item in items:
        reply = replies.get(item.item_id)
        if reply is None or reply.error is not None:
            judged.append(Judgment(item.item_id, item.subset, "engine_error", None, False))
        elif reply.text in ("yes", "no"):
            judged.append(Judgment(item.item_id, None, reply.text, float(reply.text == "yes"), True))
        else:
            judged.append(Judgment(item.item_id, None, "unsure", None, False))
    return mark_refusals(judged, replies_by(responses))


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    scores = [j.score for j in judgments if j.score is not None]
    return [MetricValue(None, "yes_rate", sum(scores) / len(scores) if scores else None, None, None, len(scores))]


class AskJudge:
    """The toy task's ``SECOND_OPINION``: the judge decides each open item."""

    def judge_model(self, params: Params) -> str | None:
        return params.judge_model

    def requests(self, judgments: list[Judgment], params: Params) -> list[Request]:
        return [
            Request(f"{j.item_id}:ask", j.item_id, "chat", messages=[{"role": "user", "content": j.item_id}])
            for j in judgments
            if j.outcome == "unsure"
        ]

    def apply(
        self, judgments: list[Judgment], requests: list[Request], responses: list[Response], params: Params
    ) -> list[Judgment]:
        said = {r.item_id: r.text for r in responses}
        return [replace(j, outcome=f"judged_{said[j.item_id]}") if j.item_id in said else j for j in judgments]


class AskPanel(AskJudge):
    """A ``JudgePanel``: every judge asked, the majority or the first judge decides."""

    def judges(self, params: Params) -> tuple[str, ...]:
        return (str(params.judge_model), *params.panel)

    def apply_panel(
        self,
        judgments: list[Judgment],
        requests: list[Request],
        responses: Mapping[str, list[Response]],
        params: Params,
    ) -> list[Judgment]:
        votes: dict[str, list[str | None]] = {}
        for judge in self.judges(params):
            for reply in responses[judge]:
                votes.setdefault(reply.item_id, []).append(reply.text)
        decided = {item: majority_verdict(v) if params.majority else v[0] for item, v in votes.items()}
        return [replace(j, outcome=f"judged_{decided[j.item_id]}") if j.item_id in decided else j for j in judgments]

    def verdict_by_majority(self, params: Params) -> bool:
        return params.majority


def toy_task(opinion: object | None = None, **params: Any) -> LoadedTask:
    """The toy task, with ``opinion`` as its ``SECOND_OPINION`` and these params."""
    spec = TaskSpec(task="toy", description="", dataset="toy", files=[], request_type="chat", module="toy",
                    metrics=[MetricSpec(name="yes_rate")])  # fmt: skip
    hooks = TaskHooks(Params, load_items, build_requests, judge, compute_metrics, SECOND_OPINION=opinion)  # type: ignore[arg-type]
    return LoadedTask(spec, hooks, Params(**params), {}, Path("toy.yaml"))


def chat(item_id: str, text: str, finish: str = "stop", reasoning: str | None = None) -> Response:
    return Request(item_id, item_id, "chat").generated(text, "p", 3, 5, finish, reasoning=reasoning)


def replies(responses: list[Response]) -> PartitionReplies:
    """The partition's rows as the judgments stage reads them: an item per response."""
    items = [Item(r.item_id, None, {}) for r in responses]
    prompts = [Request(r.request_id, r.item_id, "chat", messages=[{"role": "user", "content": "?"}]) for r in responses]
    frame = to_frame("prompts", prompts, model=KEY.model, task=KEY.task)
    return PartitionReplies(
        to_frame("task_items", items, model=KEY.model, task=KEY.task, dataset_sha256="x"),
        to_frame("responses", responses, model=KEY.model, task=KEY.task),
        lambda: frame,
    )


def answerers(folder: Path, replies_of: Callable[[str, str], str]) -> tuple[Answerers, list[str]]:
    """Each judge model's answering path over a fake engine answering ``replies_of(judge, question)``; the ids asked."""
    warehouse = WarehouseResource(database=str(folder / "w.duckdb"))
    asked: list[str] = []

    def answerer(model_id: str) -> Answerer:
        asked.append(model_id)
        engine = FakeEngine(reply=lambda question: replies_of(model_id, question))
        return Answerer(model_id, lambda: engine, warehouse, model_fingerprint=None, chunk_size=64)

    return answerer, asked


def outcomes(frame: pl.DataFrame) -> dict[str, str]:
    return dict(zip(frame.get_column("item_id").to_list(), frame.get_column("outcome").to_list(), strict=True))
