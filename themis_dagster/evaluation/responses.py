"""Stage 3, ``responses``: the evaluated model's answer to every prompt row, and the run's record.

The only stage that reaches the evaluated model: through its ``Answerer`` (the request cache,
then its engine a chunk at a time, answers committed as they arrive), then, for a task with a
``RESEND`` hook, again for what the task could not judge. A variant partition's answers are cached
under its own key (``variants.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from themis_dagster.engines.base import EngineInfo
from themis_dagster.engines.precision import DtypeChoice
from themis_dagster.evaluation.answering import Answerer, AnswerStats, answer_again
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.variants import perturbation_record, variant_answerer
from themis_dagster.exchange import GenerationParams, Request, Response
from themis_dagster.provenance import code_version
from themis_dagster.registry.models import ModelSpec, check_reasoning_budget
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.tasks.loader import LoadedTask
from themis_dagster.tasks.spec import Item
from themis_dagster.warehouse.frames import from_frame, to_frame


@dataclass
class Answered:
    """A partition's answers: its ``responses`` rows and what answering them took."""

    frame: pl.DataFrame
    """The responses table's rows, model and task included, one per prompt row and in its order."""
    stats: AnswerStats
    resent: int
    """Requests sent again because their replies could not be judged (the task's ``RESEND``)."""
    seconds: float
    precision: DtypeChoice | None
    """The dtype the answers were computed in (``Answerer.precision``)."""


def largest_answer_budget(prompts: pl.DataFrame) -> int:
    """The largest ``max_tokens`` among a partition's chat requests (0: none; a request without one: the default)."""
    chats = prompts.filter(pl.col("request_type") == "chat").get_column("gen_params").unique().to_list()
    return max((GenerationParams.model_validate(json.loads(text or "{}")).max_tokens for text in chats), default=0)


def check_answer_budget(spec: ModelSpec, key: EvaluationPartition, prompts: pl.DataFrame) -> None:
    """A reasoning model's budget plus the largest answer budget must fit, checked before any engine starts."""
    if spec.reasoning is not None:
        check_reasoning_budget(spec, largest_answer_budget(prompts), f"task {key.task}")


def answer_prompts(
    task: LoadedTask,
    key: EvaluationPartition,
    prompts: pl.DataFrame,
    answerer: Answerer,
    read_items: Callable[[], list[Item]],
) -> Answered:
    """The answer to every prompt row of the partition; ``read_items`` only where the task re-sends.

    A task's ``RESEND`` hook, for at most its rounds, names the requests whose replies it could not
    judge; they are sent again past the request cache and their new answers replace the old.
    A variant's answers are cached under the model's fingerprint folded with its perturbation's key.
    """
    answerer = variant_answerer(task, answerer)
    retries = task.params.retries()
    started = time.perf_counter()
    answers, answering = answerer.answer_frame(prompts, retries=retries)
    resent = 0
    if task.resend is not None and task.resend.rounds(task.params) > 0:  # LangBiTe: a few hundred requests
        records, again, resent = answer_again(
            task.resend,
            task.params,
            read_items(),
            from_frame("prompts", prompts, Request),
            from_frame("responses", answers, Response),
            answerer,
            retries=retries,
        )
        answers = to_frame("responses", records, model=key.model, task=key.task).select(answers.columns)
        answering.add(again)
        answering.dispatch.errors = int(answers.get_column("error").is_not_null().sum())
    seconds = time.perf_counter() - started
    frame = answers.with_columns(pl.lit(key.model).alias("model"), pl.lit(key.task).alias("task"))
    return Answered(frame, answering, resent, seconds, answerer.precision)


def run_config(
    spec: ModelSpec,
    weights: ResolvedWeights,
    task: LoadedTask,
    info: EngineInfo | None,
    identity: dict[str, str],
    precision: DtypeChoice | None,
) -> dict[str, Any]:
    """The run's reproducibility record (``evaluation_runs.config``): model, weights, task, engine, dtype, code.

    ``info`` None: no engine was loaded (every answer came from the request cache). A variant's record
    names its perturbation (name, direction, its list's sha256 and the key its answers are cached under).
    """
    perturbation = perturbation_record(task)
    return {
        "model": spec.model_dump(mode="json"),
        "weights": weights.__dict__,
        "lora_adapter_path": weights.lora_path,
        "lora_adapter_sha256": weights.lora_sha256,
        "task": task.spec.model_dump(mode="json"),
        "task_params": task.params.model_dump(mode="json"),
        **({"perturbation": perturbation} if perturbation is not None else {}),
        "engine": info.__dict__ if info is not None else identity | {"loaded": False},
        "precision": precision.__dict__ if precision is not None else None,
        "code_version": code_version(),
    }
