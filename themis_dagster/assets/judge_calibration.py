"""A judge model checked against people: it labels every text of a calibration set, and its agreement is measured.

Partitioned by judge (a registered model: the ``models`` dimension) x calibration set
(``evaluation/judging/questions.py``). The judge is asked each calibration text with its task's own
question (BOLD's regard question: same template, sampling settings and answer reading) through
the one answering path (``evaluation/answering.py``: request cache, chunks committed as they are
answered, answers under the model's fingerprint), so a re-run sends nothing new and a judge's
calibration answers and its task answers are the same kind of answer.

Rows: ``judge_calibration_labels`` (every text, its human and judge label, the reply) and
``judge_calibration_metrics`` (accuracy, Cohen's kappa, one-vs-rest sensitivity and
specificity with bootstrap CIs, the confusion matrix, the share of unreadable answers), both
replaced for the partition in one transaction. The agreement counts the rows whose answer could
be read, as a task's judged metrics count only readable answers; the unreadable share says how
many were left out. ``bias_metrics`` reads these rows to report each judged metric beside its
judge's kappa and its corrected value (``evaluation/judging/calibrations.py``).
"""

from datetime import UTC, datetime
from typing import Any

import polars as pl
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue

from themis_dagster.assets.answerers import answerer_for
from themis_dagster.assets.factory import ROW_COUNT, AssetResult, model_asset
from themis_dagster.assets.metadata import preview
from themis_dagster.errors import ConfigError
from themis_dagster.evaluation.answering import answering_metadata
from themis_dagster.evaluation.judging.questions import (
    JudgeQuestion,
    calibrated_questions,
    check_judge_labels,
    load_calibration_set,
    standalone_judge,
)
from themis_dagster.partitions import judge_and_set, judge_calibration_partitions
from themis_dagster.resources import EngineResource, ThemisConfig, WarehouseResource
from themis_dagster.stats import Estimate, Resampling
from themis_dagster.stats.agreement import JudgeAgreement, judge_agreement
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import CalibratedJudge, TaskInputs, TaskParams
from themis_dagster.warehouse.frames import rows_frame
from themis_dagster.warehouse.partitions import Write, replace_rows
from themis_dagster.warehouse.schema import ensure_schema

JUDGES_GROUP = "judges"
LABELS, METRICS = "judge_calibration_labels", "judge_calibration_metrics"


def calibrated_judge(task: LoadedTask) -> CalibratedJudge:
    """The task's judge, which must offer calibration (``evaluation/judging/questions.py``)."""
    judge = task.calibrated_judge
    if judge is None:
        raise ConfigError(f"task {task.name!r}: its SECOND_OPINION cannot be calibrated (no CalibratedJudge methods)")
    return judge


def question_judge(themis: ThemisConfig, question: JudgeQuestion) -> tuple[CalibratedJudge, TaskParams, TaskInputs]:
    """The judge that answers ``question``, the params it is asked and resampled with, and where datasets are.

    A task's judge comes with the task's params (its overrides applied); a standalone judge
    (the refusal judge) with its own.
    """
    if question.task is None:
        judge = standalone_judge(question.kind)
        return judge, judge.params, themis.task_inputs()
    task = themis.task(question.task)
    return calibrated_judge(task), task.params, task.inputs


def _estimate_row(metric: str, estimate: Estimate, label: str | None = None) -> dict[str, Any]:
    return {"metric": metric, "label": label, "judge_label": None, "value": estimate.value,
            "ci_low": estimate.ci_low, "ci_high": estimate.ci_high, "n": estimate.n}  # fmt: skip


def agreement_rows(agreement: JudgeAgreement | None, unreadable: int, total: int) -> list[dict[str, Any]]:
    """The metric rows of one calibration: accuracy, kappa, per-class rates, confusion cells, unreadable share."""
    rows = [{"metric": "unreadable_share", "label": None, "judge_label": None,
             "value": unreadable / total if total else None, "ci_low": None, "ci_high": None, "n": total}]  # fmt: skip
    if agreement is None:
        return rows
    rows += [_estimate_row("accuracy", agreement.accuracy), _estimate_row("kappa", agreement.kappa)]
    for rates in agreement.per_class:
        rows += [
            _estimate_row("sensitivity", rates.sensitivity, rates.label),
            _estimate_row("specificity", rates.specificity, rates.label),
        ]
    for i, human in enumerate(agreement.labels):
        for j, said in enumerate(agreement.labels):
            rows.append({"metric": "confusion", "label": human, "judge_label": said,
                         "value": float(agreement.confusion[i][j]), "ci_low": None, "ci_high": None,
                         "n": agreement.n})  # fmt: skip
    return rows


@model_asset(
    partitions_def=judge_calibration_partitions,
    group=JUDGES_GROUP,
    description="A judge model (the partition's judge) labels every text of a human-labelled calibration set "
    "through the answering path; its accuracy, Cohen's kappa, per-class sensitivity and specificity (bootstrap "
    "CIs) and confusion matrix against the human labels.",
)
def judge_calibration(
    context: AssetExecutionContext, themis: ThemisConfig, warehouse: WarehouseResource, engine: EngineResource
) -> AssetResult:
    key = judge_and_set(context)
    spec = themis.model(key.judge)  # an unknown judge fails here, before any engine
    question = calibrated_questions()[key.calibration_set]
    judge, params, inputs = question_judge(themis, question)
    datasets_dir, cache_dir = inputs.directories()
    calibration = load_calibration_set(
        key.calibration_set, datasets_dir=datasets_dir, cache_dir=cache_dir, allow_download=themis.allow_downloads
    )
    check_judge_labels(judge, question.kind, calibration)  # a mismatched label set fails before any engine
    asks = judge.calibration_requests(question.kind, calibration.rows, params)
    answerer = answerer_for(spec, themis.weights(spec), themis=themis, engine=engine, warehouse=warehouse)
    replies, answering = answerer.answer(asks, retries=params.retries())
    now = datetime.now(UTC).replace(tzinfo=None)
    partition = {"judge": key.judge, "calibration_set": key.calibration_set, "run_id": context.run_id,
                 "materialized_at": now}  # fmt: skip
    labelled = []
    for row, reply in zip(calibration.rows, replies, strict=True):
        text = None if reply.error is not None else reply.text
        labelled.append(partition | {
            "item_id": row.item_id, "context": row.context, "text": row.text, "human_label": row.label,
            "judge_label": judge.read_label(question.kind, text), "reply": (text or "")[:200], "error": reply.error,
        })  # fmt: skip
    readable = [row for row in labelled if row["judge_label"] is not None]
    agreement = (
        judge_agreement(
            [row["human_label"] for row in readable],
            [row["judge_label"] for row in readable],
            calibration.labels,
            resampling=Resampling(
                n_resamples=params.bootstrap_resamples,
                confidence=params.confidence,
                seed=params.seed,
            ),
        )
        if readable
        else None
    )
    metrics = [partition | row for row in agreement_rows(agreement, len(labelled) - len(readable), len(labelled))]
    scope = {"judge": key.judge, "calibration_set": key.calibration_set}
    labels_frame, metrics_frame = rows_frame(LABELS, labelled), rows_frame(METRICS, metrics)
    with warehouse.connect() as conn:
        ensure_schema(conn)
        replace_rows(conn, [Write(LABELS, labels_frame, scope), Write(METRICS, metrics_frame, scope)])
    summary = metrics_frame.filter(pl.col("metric") != "confusion").select("metric", "label", "value", "ci_low",
                                                                          "ci_high", "n")  # fmt: skip
    kappa = agreement.kappa.value if agreement is not None else None
    return MaterializeResult(
        metadata={
            ROW_COUNT: labels_frame.height,
            "judge": key.judge,
            "calibration_set": calibration.name,
            "question": f"{question.task or 'judge'}:{question.kind}",
            "source": calibration.source,
            "license": calibration.license,
            "calibration_sha256": MetadataValue.json(list(calibration.sha256)),
            "readable_answers": len(readable),
            "agreement": preview(summary, rows=40),
            **({"kappa": kappa} if kappa is not None else {}),
            **answering_metadata(answering, themis.request_cache),
            # what starting the engine took within this run (a time budget measures the answering apart from it)
            "engine_load_seconds": round(info.load_seconds, 2)
            if (info := engine.loaded_info()) is not None and engine.loaded_in_last_call
            else 0.0,
        }
    )
