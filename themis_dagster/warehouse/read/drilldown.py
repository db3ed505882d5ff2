"""From a metric value to the judgments, prompts and replies behind it, a page at a time (``metric_drilldown``'s
rule), and a stored request as the task built it.

``metric_drilldown`` and ``judgment_drilldown`` define which judgments a metric covers: a headline
value all of them, a subset's value those of that subset or of its children ("race" covers
"race/racism"), a slice that is not an item subset (``template=kara``) those sent that template.
Paging them through the views would join every prompt and reply first; these queries page the
judgments alone (``ORDER BY item_id LIMIT ? OFFSET ?``) and join only the page's prompts and replies,
by equality, so a partition of 10^6 judgments answers in well under a second
(``bench/explorer_drilldown.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import duckdb
import pandas as pd

from themis_dagster.warehouse.read.query import json_object, number, rows, scalar

PAGE_SIZES = (10, 25, 50, 100)
# columns a reply's reasoning may be stored in (a reasoning model's thinking), first present wins
REASONING_COLUMNS = ("reasoning", "reasoning_text", "reasoning_content")


def columns_of(conn: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    """The columns a declared table or view has in this warehouse (empty when it is absent)."""
    if not table.isidentifier():
        raise ValueError(f"not a table name: {table!r}")
    try:  # information_schema takes ~0.2 s on a large file; an empty read of the table takes none
        cursor = conn.execute(f"SELECT * FROM {table} LIMIT 0")  # noqa: S608 - an identifier, checked above
    except duckdb.CatalogException:
        return set()
    return {str(column[0]) for column in cursor.description or []}


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
    """A judgment with what was sent and received; ``detail`` is the task's own record of it (chosen answer,
    loglikelihoods, a judge's reply...), ``fields`` the item as the benchmark file has it (``task_items``)."""

    item_id: str
    subset: str | None
    outcome: str | None
    score: float | None
    parsed: bool
    requests: list[SentRequest] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    refused: bool | None = None


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
    "item_ids": " AND list_contains($item_ids::VARCHAR[], j.item_id)",
    "reading": " AND j.reading = $reading",
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
    item_ids: list[str] | None  # only these judgments (the items a metric counts)
    reading: str | None  # one reading of each reply, where the warehouse keeps several (``judgments.reading``)


def _filtered(model: str, task: str, where: Slice, **filters: Unpack[JudgmentFilters]) -> tuple[str, dict[str, object]]:
    """``FROM judgments ... WHERE ...`` for the filters in use, and their bound values."""
    values: dict[str, object] = {
        "subset": where.subset,
        "item_subset": filters.get("item_subset"),
        "outcome": filters.get("outcome"),
        "parsed": filters.get("parsed"),
        "item_ids": filters.get("item_ids"),
        "reading": filters.get("reading"),
        "template": where.template,
    }
    used = {name: value for name, value in values.items() if value is not None}
    return _JUDGMENTS + "".join(_CLAUSES[name] for name in used), {"model": model, "task": task} | used


def drilldown_choices(
    conn: duckdb.DuckDBPyConnection, model: str, task: str, where: Slice
) -> tuple[list[str], list[tuple[str | None, int]]]:
    """The item subsets and the outcomes (with counts) among the judgments a slice covers."""
    judged, params = _filtered(model, task, where)
    subsets = rows(conn, f"SELECT DISTINCT j.subset {judged} AND j.subset IS NOT NULL ORDER BY 1", params)
    outcomes = rows(conn, f"SELECT j.outcome, count(*) AS n {judged} GROUP BY 1 ORDER BY n DESC, 1", params)
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
    page = rows(
        conn,
        f"SELECT j.item_id, j.subset, j.outcome, j.score, j.parsed, j.detail, j.refused {judged} "
        f"ORDER BY j.item_id {'DESC' if backwards else 'ASC'} LIMIT $limit OFFSET $offset",
        params | {"limit": wanted, "offset": total - offset - wanted if backwards else offset},
    )
    if backwards:
        page.reverse()
    ids = [str(row["item_id"]) for row in page]
    requests = _requests_of(conn, model, task, ids) if ids else {}
    fields = _fields_of(conn, model, task, ids) if ids else {}
    items = [
        JudgedItem(
            item_id=str(row["item_id"]),
            subset=row["subset"],
            outcome=row["outcome"],
            score=number(row["score"]),
            parsed=bool(row["parsed"]),
            requests=requests.get(str(row["item_id"]), []),
            detail=json_object(row["detail"]),
            fields=fields.get(str(row["item_id"]), {}),
            refused=row["refused"],
        )
        for row in page
    ]
    return DrilldownPage(total, offset, limit, items, where.note)


def _fields_of(conn: duckdb.DuckDBPyConnection, model: str, task: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The benchmark's own fields of the given judgments' items (a judgment of one attempt: its item's)."""
    found = rows(
        conn,
        """
        WITH wanted AS (SELECT unnest($ids::VARCHAR[]) AS judged),
        items AS (
            SELECT w.judged, t.fields FROM wanted w JOIN task_items t ON t.model = $model AND t.task = $task
                 AND t.item_id = w.judged
            UNION ALL
            SELECT DISTINCT w.judged, t.fields FROM wanted w
            JOIN prompts p ON p.model = $model AND p.task = $task AND p.request_id = w.judged AND p.item_id <> w.judged
            JOIN task_items t ON t.model = $model AND t.task = $task AND t.item_id = p.item_id
        )
        SELECT judged, any_value(fields) AS fields FROM items GROUP BY judged
        """,
        {"ids": ids, "model": model, "task": task},
    )
    return {str(row["judged"]): json_object(row["fields"]) for row in found}


def readings(conn: duckdb.DuckDBPyConnection, model: str, task: str) -> list[str]:
    """The readings the warehouse keeps of (model, task)'s replies (``judgments.reading``: a benchmark's official
    reader and ours), official first; empty where it keeps one (or has no such column)."""
    if "reading" not in columns_of(conn, "judgments"):
        return []
    found = rows(
        conn,
        "SELECT DISTINCT reading FROM judgments WHERE model = ? AND task = ? AND reading IS NOT NULL",
        [model, task],
    )
    names = sorted(str(row["reading"]) for row in found)
    return sorted(names, key=lambda name: name != "official") if len(names) > 1 else []


@dataclass(frozen=True)
class ItemReading:
    """How one reading read an item's reply."""

    reading: str
    outcome: str | None
    score: float | None
    parsed: bool


def item_readings(conn: duckdb.DuckDBPyConnection, model: str, task: str, item_id: str) -> list[ItemReading]:
    """Every reading of one judgment (official first); empty where the warehouse keeps one reading."""
    if not readings(conn, model, task):
        return []
    found = rows(
        conn,
        "SELECT reading, outcome, score, parsed FROM judgments WHERE model = ? AND task = ? AND item_id = ? "
        "ORDER BY reading <> 'official', reading",
        [model, task, item_id],
    )
    return [ItemReading(str(r["reading"]), r["outcome"], number(r["score"]), bool(r["parsed"])) for r in found]


def judge_prompt(conn: duckdb.DuckDBPyConnection, judge: str, reply: str, judged: list[str]) -> str | None:
    """Exactly what a judge model saw when it gave ``reply`` about an item (its request, kept in the request cache
    under the judge's id, that holds every text of ``judged``: the item's prompt and reply); None when the cache no
    longer holds it."""
    found = rows(
        conn,
        "SELECT prompt_text FROM request_cache WHERE model = ? AND text = ? "
        "AND list_bool_and([contains(prompt_text, t) FOR t IN ?::VARCHAR[]]) ORDER BY cached_at DESC LIMIT 1",
        [judge, reply, [t for t in judged if t]],
    )
    return str(found[0]["prompt_text"]) if found and found[0]["prompt_text"] is not None else None


def slice_item_ids(conn: duckdb.DuckDBPyConnection, model: str, task: str, where: Slice) -> list[str]:
    """The ids of the judgments a slice covers (the headline: every judgment of the task)."""
    judged, params = _filtered(model, task, where)
    return [str(row["item_id"]) for row in rows(conn, f"SELECT j.item_id {judged} ORDER BY 1", params)]


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
    found = rows(
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
    """A request as the task built it, with the reply stored for it (``reply``, ``logprob``; for the playground's
    "ask again", which shows it beside the new one) and ``siblings``: every loglikelihood request of its item
    (``request_id``, ``continuation``, ``logprob``), the options scored together. None when there is none."""
    found = rows(
        conn,
        "SELECT p.request_type, p.context, p.continuation, p.prompt, p.messages, p.gen_params, p.template, p.item_id, "
        "r.text AS reply, r.logprob, r.prompt_text FROM prompts p LEFT JOIN responses r ON r.model = p.model "
        "AND r.task = p.task AND r.request_id = p.request_id WHERE p.model = ? AND p.task = ? AND p.request_id = ?",
        [model, task, request_id],
    )
    if not found:
        return None
    row = found[0]
    row["siblings"] = []
    if row["request_type"] == "loglikelihood":
        row["siblings"] = rows(
            conn,
            "SELECT p.request_id, p.continuation, r.logprob FROM prompts p LEFT JOIN responses r ON r.model = p.model "
            "AND r.task = p.task AND r.request_id = p.request_id WHERE p.model = ? AND p.task = ? AND p.item_id = ? "
            "AND p.request_type = 'loglikelihood' AND p.context IS NOT DISTINCT FROM ? ORDER BY p.request_id",
            [model, task, row["item_id"], row["context"]],
        )
    for key in ("messages", "gen_params"):
        if isinstance(row[key], str):
            try:
                row[key] = json.loads(row[key])
            except ValueError:
                row[key] = None
    return row
