"""Regard and toxicity of each continuation, asked of a registered judge model (``judge_model``).

BOLD scores regard with Sheng et al.'s BERT regard classifier and toxicity with a BERT
toxicity classifier (sec. 4.1, 4.3). This project runs generative models only, so the
continuation is instead shown to a second registered model (the task's ``SecondOpinion``,
checked against the registry before any engine starts) with one question for each, its
one-word answer read as ``positive|negative|neutral`` regard and ``toxic|non-toxic``. That is
a deviation from the paper's classifiers (docs/benchmark-families.md). Without a judge the
two metrics are not computed (NULL), never zero; an unreadable judge answer leaves that
continuation's value None (not counted) with the reply kept in ``detail``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from themis_dagster.judging.calibration_sets import CalibrationRow
from themis_dagster.judging.correction import JudgedValue
from themis_dagster.stats.agreement import majority_verdict
from themis_dagster.tasks.bold import metrics
from themis_dagster.tasks.bold.data import JUDGE_ANSWERS, Params
from themis_dagster.tasks.bold.judge import MAX_CHARS
from themis_dagster.tasks.rendering import TemplatedChat, render
from themis_dagster.tasks.spec import JudgedInputs, Judgment, Request, Response

QUESTIONS = {"regard": "bold_regard", "toxicity": "bold_toxicity"}
# The calibration set that checks each question's labels (evaluation/judging/questions.py); toxicity has none.
CALIBRATION_SETS = {"regard": "regard"}
ANSWERS = JUDGE_ANSWERS
# The earliest answer word; at one position the longer word first ("non-toxic" before "toxic"),
# one linear scan (a list of every match would be quadratic on a long hostile reply).
_FIRST_ANSWER = {
    kind: re.compile(r"\b(" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + r")\b")
    for kind, words in ANSWERS.items()
}


def read_answer(kind: str, text: str | None) -> str | None:
    """The first answer word of ``kind`` in the reply (``non-toxic`` before ``toxic``), None if none."""
    if not text:
        return None
    lowered = text[:MAX_CHARS].lower().replace("nontoxic", "non-toxic").replace("not toxic", "non-toxic")
    found = _FIRST_ANSWER[kind].search(lowered)
    return found.group(1) if found else None


class RegardToxicityJudge:
    """The task's ``SecondOpinion``: ``judge_model`` rates regard and toxicity of each parsed continuation.

    Also a ``CalibratedJudge``: its regard question is checked on Sheng et al.'s regard annotations
    (``CALIBRATION_SETS``); toxicity has no calibration set here, so its rate is reported as judged
    by an "uncalibrated judge".
    """

    def __init__(self, templates: dict[str, str]) -> None:
        self.templates = templates
        self.calibration_sets: Mapping[str, str] = CALIBRATION_SETS

    def judge_model(self, params: Params) -> str | None:
        return params.judge_model

    def _ask(self, kind: str, prompt: str, continuation: str, request_id: str, item_id: str, params: Params) -> Request:
        """Question ``kind`` about one text: the one way the judge is asked, in the task and in its calibration."""
        name = QUESTIONS[kind]
        gen_params = params.generation.model_copy(
            update={"temperature": 0.0, "max_tokens": params.judge_max_tokens}
        ).model_dump(mode="json")
        text = render(self.templates, name, prompt=prompt, continuation=continuation)
        return TemplatedChat(self.templates, gen_params).ask(text, name, request_id=request_id, item_id=item_id)

    def requests(self, judgments: list[Judgment], params: Params) -> list[Request]:
        asks = []
        for judgment in judgments:
            if not judgment.parsed:
                continue
            for kind in QUESTIONS:
                asks.append(
                    self._ask(
                        kind,
                        judgment.detail["prompt"],
                        judgment.detail["continuation"],
                        f"{judgment.item_id}:{kind}",
                        judgment.item_id,
                        params,
                    )
                )
        return asks

    # --- calibration (the contract's CalibratedJudge, tasks/spec.py) ---------------------------------------------

    def labels(self, kind: str) -> tuple[str, ...]:
        return ANSWERS[kind]

    def calibration_requests(self, kind: str, rows: Sequence[CalibrationRow], params: Params) -> list[Request]:
        """The task's question about each calibration text: a regard annotation is a whole sentence
        (``XYZ was described as ...``), asked as an empty sentence beginning and that continuation."""
        return [
            self._ask(kind, row.context or "", row.text, f"{row.item_id}:{kind}", row.item_id, params) for row in rows
        ]

    def read_label(self, kind: str, reply: str | None) -> str | None:
        return read_answer(kind, reply)

    def judged_values(self, judged: JudgedInputs) -> list[JudgedValue]:
        params: Params = judged.params
        if params.judge_model is None:
            return []
        if params.judge_verdict == "majority":  # calibrated as a judge of its own (majority_calibration)
            name = "majority of " + ", ".join(params.judges())
            return metrics.judged_values(judged.judgments, judged.values, params, name, judged.calibrations)
        return metrics.judged_values(judged.judgments, judged.values, params, params.judge_model, judged.calibrations)

    def judges(self, params: Params) -> tuple[str, ...]:
        return params.judges()

    def verdict_by_majority(self, params: Params) -> bool:
        return params.judge_verdict == "majority"

    def apply(
        self, judgments: list[Judgment], requests: list[Request], responses: list[Response], params: Params
    ) -> list[Judgment]:
        assert params.judge_model is not None, "asked only with a judge_model"
        return self.apply_panel(judgments, requests, {params.judge_model: responses}, params)

    def apply_panel(
        self,
        judgments: list[Judgment],
        requests: list[Request],
        responses: Mapping[str, list[Response]],
        params: Params,
    ) -> list[Judgment]:
        """Each continuation's regard and toxicity: judge_model's label, or with ``judge_verdict`` 'majority'
        the panel's majority label (``stats.agreement.majority_verdict``: a tie or no readable vote is None).

        With a panel, every judge's label is kept (``<kind>_votes``, in ``params.judges()`` order) for
        the agreement metrics; the reply kept is judge_model's.
        """
        judges = params.judges()
        by_judge = {judge: {r.request_id: r for r in responses[judge]} for judge in judges}
        updated = []
        for judgment in judgments:
            if not judgment.parsed:
                updated.append(judgment)
                continue
            detail: dict[str, Any] = dict(judgment.detail)
            for kind in QUESTIONS:
                texts = [_reply_text(by_judge[judge].get(f"{judgment.item_id}:{kind}")) for judge in judges]
                votes = [read_answer(kind, text) for text in texts]
                detail[kind] = majority_verdict(votes) if params.judge_verdict == "majority" else votes[0]
                detail[f"{kind}_reply"] = (texts[0] or "")[:200]
                detail[f"{kind}_status"] = "judged" if detail[kind] is not None else _unjudged(params)
                if len(judges) > 1:
                    detail[f"{kind}_votes"] = votes
            detail["judge_model"] = params.judge_model
            updated.append(replace(judgment, detail=detail))
        return updated


def _reply_text(reply: Response | None) -> str | None:
    return None if reply is None or reply.error is not None else reply.text


def _unjudged(params: Params) -> str:
    return "no majority among the judges" if params.judge_verdict == "majority" else "unreadable judge answer"
