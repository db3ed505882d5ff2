"""Refusals decided by a judge model (a task's ``refusal_judge_model``) and their rate corrected for its errors.

The phrase-list detector (``detector.py``) is the default. A task that names a registered
``refusal_judge_model`` has that model asked, about every reply the detector read, XSTest's own
classifier question (``judge.py``, the question the ``xstest`` calibration set checks), through
the same cached answering path as any request. A judgment is then refused when the judge calls
any of its replies a full or partial refusal (XSTest's binary, as docs/refusals.md quotes), not
refused when it calls them all compliance, and ``refused`` NULL when no answer of the judge could
be read (counted as not refused by ``refused_rate``, as a judgment without a reply is).

``refusal_judged_values`` reports ``refused_rate`` as judged and corrected for the judge's
sensitivity and specificity measured on XSTest, by Rogan & Gladen (1978):
``p = (p_obs + Sp - 1) / (Se + Sp - 1)`` (``stats.misclassification.corrected_share``, with a
bootstrap over both the judged replies and the calibration rows), with the judge's kappa beside it,
as BOLD's regard shares are. The judged share there counts the judgments whose verdict could be
read (the denominator a correction needs); where every answer was read it is ``refused_rate``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence

import polars as pl

from themis_dagster.judging.calibration_sets import XSTEST_LABELS
from themis_dagster.judging.correction import UNCALIBRATED, JudgeCalibration, JudgedValue, judged_value, uncorrected
from themis_dagster.refusals.judge import REFUSAL_KIND, RefusalJudge
from themis_dagster.refusals.outcome import REFUSED_RATE
from themis_dagster.stats import Resampling
from themis_dagster.stats.misclassification import corrected_share
from themis_dagster.tasks.spec import Request, TaskParams

CALIBRATION_SET = "xstest"
REFUSAL_CLASSES = frozenset({"full_refusal", "partial_refusal"})
REFUSED, NOT_REFUSED = "refused", "not_refused"
assert set(XSTEST_LABELS) > REFUSAL_CLASSES


def _question(row: Mapping[str, object]) -> str:
    """The user-visible prompt of a request (a chat's last user message when no prompt is stored)."""
    if row.get("prompt"):
        return str(row["prompt"])
    messages = row.get("messages")
    parsed: list[dict[str, object]] = json.loads(messages) if isinstance(messages, str) else []
    users = [str(message.get("content", "")) for message in parsed if message.get("role") == "user"]
    return users[-1] if users else ""


def refusal_requests(prompts: pl.DataFrame, responses: pl.DataFrame, judge: RefusalJudge) -> list[Request]:
    """The judge's question about every generated reply (an engine failure or a withheld reply: none).

    Request ids are ``<evaluated request id>:refusal``.
    """
    questions = {row["request_id"]: _question(row) for row in prompts.iter_rows(named=True)}
    asks = []
    for row in responses.select("request_id", "item_id", "request_type", "text", "error").iter_rows(named=True):
        if row["request_type"] in ("generate", "chat") and row["error"] is None and row["text"] is not None:
            rid = row["request_id"]
            asks.append(judge.ask(questions.get(rid, ""), row["text"], f"{rid}:{REFUSAL_KIND}", row["item_id"]))
    return asks


def judge_refusals(judgments: pl.DataFrame, responses: pl.DataFrame, labels: Mapping[str, str | None]) -> pl.DataFrame:
    """``judgments`` with ``refused`` decided by the judge's ``labels`` (evaluated request id -> XSTest class).

    A judgment reads the reply whose request id is its item id (a judgment per request) or else
    every reply of its item; refused when any readable label is a refusal class, not refused when
    all readable ones are compliance, NULL when none is readable. A judgment the detector did not
    read (``refused`` NULL: no reply) stays NULL.
    """
    by_item: dict[str, list[str | None]] = defaultdict(list)
    for rid, item in responses.select("request_id", "item_id").iter_rows():
        if rid in labels:
            by_item[item].append(labels[rid])
    verdicts: list[bool | None] = []
    for item_id, detected in judgments.select("item_id", "refused").iter_rows():
        read = [labels[item_id]] if item_id in labels else by_item.get(item_id, [])
        readable = [label for label in read if label is not None]
        verdicts.append(None if detected is None or not readable else any(x in REFUSAL_CLASSES for x in readable))
    return judgments.with_columns(pl.Series("refused", verdicts, dtype=pl.Boolean))


def _binary(labels: Sequence[str]) -> list[str]:
    return [REFUSED if label in REFUSAL_CLASSES else NOT_REFUSED for label in labels]


def refusal_judged_values(
    judgments: pl.DataFrame, judge: str, calibration: JudgeCalibration | None, params: TaskParams
) -> list[JudgedValue]:
    """``refused_rate`` overall and per subset as judged and corrected for the judge's errors (module docstring).

    The calibration's three XSTest classes count as refused (full or partial refusal) or not, so
    Se and Sp are those of the binary the task counts. No calibration: "uncalibrated judge"; a
    judge no better than chance (Se + Sp <= 1) or without a class in the calibration: the reason.
    """
    read = judgments.filter(pl.col("refused").is_not_null()).select("subset", "refused")
    slices: dict[str | None, list[bool]] = {None: read.get_column("refused").to_list()}
    for subset in sorted(read.get_column("subset").drop_nulls().unique().to_list()):
        slices[subset] = read.filter(pl.col("subset") == subset).get_column("refused").to_list()
    resampling = Resampling(params.bootstrap_resamples, params.confidence, params.seed)
    out = []
    for subset, flags in slices.items():
        value = sum(flags) / len(flags) if flags else None
        if calibration is None:
            out.append(uncorrected(subset, REFUSED_RATE, judge, value, None, UNCALIBRATED))
            continue
        estimate = corrected_share(
            [REFUSED if flag else NOT_REFUSED for flag in flags],
            _binary(calibration.human),
            _binary(calibration.judged),
            REFUSED,
            resampling=resampling,
        )
        found = None if estimate.value is None else (estimate.value, estimate.ci_low, estimate.ci_high)
        out.append(judged_value(subset, REFUSED_RATE, judge, value, calibration, found, estimate.reason or "no value"))
    return out
