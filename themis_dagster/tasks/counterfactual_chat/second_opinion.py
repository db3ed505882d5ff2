"""The judge of a counterfactual pair: the pairwise question in both orders, each reply's regard, their embeddings.

The task's ``SecondOpinion`` (asked only when ``judge_model`` names a registered model, through
the one answering path with that model's engine and request cache). Also a ``CalibratedJudge``:
its regard question is BOLD's, word for word and with the same sampling settings, so the judge's
calibration on Sheng et al.'s regard set corrects ``negative_regard_share`` (kappa and corrected
value beside it, docs/judges.md); the pairwise question has no human-labelled set here, so
``harmful_difference_rate`` is reported as judged by an "uncalibrated judge".
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from themis_dagster.judging.calibration_sets import CalibrationRow
from themis_dagster.judging.correction import (
    UNCALIBRATED,
    Interval,
    JudgedValue,
    corrected_values,
    interval,
    share,
    uncorrected,
)
from themis_dagster.stats import Resampling
from themis_dagster.stats.misclassification import GroupCorrection
from themis_dagster.tasks.counterfactual_chat.data import Params
from themis_dagster.tasks.counterfactual_chat.judge import (
    ORDERS,
    REGARD,
    REGARD_LABELS,
    cosine,
    pairwise_questions,
    read_regard,
    regard_question,
)
from themis_dagster.tasks.counterfactual_chat.metrics import with_answers
from themis_dagster.tasks.rendering import TemplatedChat, render
from themis_dagster.tasks.spec import JudgedInputs, Judgment, Request, Response

CALIBRATION_SETS = {"regard": "regard"}
EMBEDDING_KIND = "hidden_mean"
NEGATIVE = "negative"


def _outcome(harmful: int | None) -> str:
    return {None: "no_verdict", 0: "no_harmful_difference", 1: "harmful_difference"}[harmful]


class CounterfactualJudge:
    """``SecondOpinion`` and ``CalibratedJudge`` of the counterfactual chat (see the module docstring)."""

    def __init__(self, templates: dict[str, str]) -> None:
        self.templates = templates
        self.calibration_sets: Mapping[str, str] = CALIBRATION_SETS

    def judge_model(self, params: Params) -> str | None:
        return params.judge_model

    def _chat(self, params: Params) -> TemplatedChat:
        gen_params = params.generation.model_copy(
            update={"temperature": 0.0, "max_tokens": params.judge_max_tokens}
        ).model_dump(mode="json")
        return TemplatedChat(self.templates, gen_params)

    def requests(self, judgments: list[Judgment], params: Params) -> list[Request]:
        """Per pair both of whose replies were read: the pairwise question twice, regard and (``similarity``)
        the embedding of each reply. A reply shared by several pairs asks the same text again: the answering
        path answers it once."""
        chat, asks = self._chat(params), []
        for judgment in judgments:
            if not judgment.parsed:
                continue
            detail, item = judgment.detail, judgment.item_id
            replies = (detail["reply_a"], detail["reply_b"])
            fields = {
                "request": detail["request"],
                "identity_a": detail["identity_a"],
                "identity_b": detail["identity_b"],
            }
            asks += pairwise_questions(item, fields, replies, chat)
            asks += [regard_question(item, side, reply, chat) for side, reply in zip("ab", replies, strict=True)]
            if params.similarity:
                asks += [
                    Request.embedding(reply, f"{item}:embedding:{side}", item)
                    for side, reply in zip("ab", replies, strict=True)
                ]
        return asks

    def apply(
        self, judgments: list[Judgment], requests: list[Request], responses: list[Response], params: Params
    ) -> list[Judgment]:
        """Each pair's detail with the judge's answers read (pairwise by order, regard by side) and the
        embeddings' cosine; its score the harmful difference (None where either order was unreadable)."""
        answers: dict[str, dict[str, Response]] = defaultdict(dict)
        for response in responses:
            answers[response.item_id][response.request_id] = response
        out = []
        for judgment in judgments:
            if not judgment.parsed:
                out.append(judgment)
                continue
            got = answers.get(judgment.item_id, {})

            def text(suffix: str, got: dict[str, Response] = got, item: str = judgment.item_id) -> str | None:
                found = got.get(f"{item}:{suffix}")
                return None if found is None or found.error is not None else found.text

            pairwise = {order: text(f"pairwise:{order}") for order in ORDERS}
            detail = with_answers(judgment.detail, pairwise, {side: text(f"regard:{side}") for side in "ab"})
            detail["similarity"] = cosine(*(_vector(text(f"embedding:{side}")) for side in "ab"))
            out.append(replace(judgment, outcome=_outcome(detail["harmful"]), score=detail["harmful"], detail=detail))
        return out

    # --- calibration (the CalibratedJudge of tasks/calibration.py) ---------------------------------------

    def labels(self, kind: str) -> tuple[str, ...]:
        if kind != "regard":
            raise KeyError(kind)
        return REGARD_LABELS

    def calibration_requests(self, kind: str, rows: Sequence[CalibrationRow], params: Params) -> list[Request]:
        """The regard question about each calibration text, asked as BOLD asks it (sentence start, continuation)."""
        chat = self._chat(params)
        return [
            chat.ask(
                _regard_text(self.templates, row.context or "", row.text),
                REGARD,
                request_id=f"{row.item_id}:{kind}",
                item_id=row.item_id,
            )
            for row in rows
        ]

    def read_label(self, kind: str, reply: str | None) -> str | None:
        return read_regard(reply)

    def judged_values(self, judged: JudgedInputs) -> list[JudgedValue]:
        """``negative_regard_share`` (per reply group) and ``negative_regard_gap`` (per pair) corrected for the
        judge's errors on the regard set; ``harmful_difference_rate`` as judged by an uncalibrated judge."""
        params: Params = judged.params
        judgments, values, calibrations = judged.judgments, judged.values, judged.calibrations
        if params.judge_model is None:
            return []
        judge = params.judge_model
        out = [
            uncorrected(row.subset, row.metric, judge, row.value, None, UNCALIBRATED)
            for row in values
            if row.metric == "harmful_difference_rate"
        ]
        regard = [
            (row.subset, row.metric, row.value)
            for row in values
            if row.metric in ("negative_regard_share", "negative_regard_gap")
        ]

        def estimate(correction: GroupCorrection, subset: str | None, metric: str) -> Interval | None:
            if metric == "negative_regard_share":
                return share(correction, subset or "", NEGATIVE, params.confidence)
            return _gap(correction, subset, params.confidence)

        return out + corrected_values(
            regard, judge, calibrations.get("regard"), _reply_labels(judgments), estimate,
            resampling=Resampling(params.bootstrap_resamples, params.confidence, params.seed),
            empty="no judged replies in this slice",
        )  # fmt: skip


def _regard_text(templates: Mapping[str, str], prompt: str, continuation: str) -> str:
    return render(dict(templates), REGARD, prompt=prompt, continuation=continuation)


def _vector(payload: str | None) -> list[float] | None:
    """The embedding of an ``embedding`` answer (``{"vectors": {kind: [...]}}``), None where there is none."""
    if not payload:
        return None
    try:
        vectors = json.loads(payload).get("vectors", {})
    except (ValueError, AttributeError):
        return None
    found = vectors.get(EMBEDDING_KIND)
    return [float(x) for x in found] if isinstance(found, list) else None


def _reply_labels(judgments: list[Judgment]) -> dict[str, list[str]]:
    """The judge's regard labels of each reply once (a reply shared by pairs counts once), by slice:
    ``""`` (all) and ``<axis>:<group>``."""
    seen: dict[tuple[str, str, str], str] = {}
    for judgment in judgments:
        for side in "ab":
            label = judgment.detail.get(f"regard_{side}")
            key = (judgment.detail["request_id"], judgment.detail["axis"], judgment.detail[f"group_{side}"])
            if label is not None and key not in seen:
                seen[key] = label
    slices: dict[str, list[str]] = defaultdict(list)
    for (_, axis, group), label in seen.items():
        slices[""].append(label)
        slices[f"{axis}:{group}"].append(label)
    return slices


def _gap(correction: GroupCorrection, subset: str | None, confidence: float) -> Interval | None:
    """A pair's corrected negative share of b minus a (``subset`` ``axis:a~b``); None for the axis and overall rows."""
    if subset is None or "~" not in subset:
        return None
    axis, _, pair = subset.partition(":")
    a, _, b = pair.partition("~")
    groups = (f"{axis}:{a}", f"{axis}:{b}")
    if any(group not in correction.point for group in groups):
        return None
    j = correction.labels.index(NEGATIVE)
    point = float(correction.point[groups[1]][j] - correction.point[groups[0]][j])
    replicates = np.asarray(correction.replicates[groups[1]][:, j] - correction.replicates[groups[0]][:, j])
    return interval(replicates, point, confidence)
