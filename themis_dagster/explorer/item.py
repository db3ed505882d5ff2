"""One judged item, as a person checks it: what was asked, what came back, what the task made of it.

The options (loglikelihood items: each continuation with its logprob; the shared context once)
in one small table with the chosen, correct and stereotyped answers marked; each prompt exactly as
sent and the raw reply, the reasoning of a reasoning model folded apart; a judge model's prompt,
reply and verdict where one was asked; each reading of the reply where the warehouse keeps more
than one (a benchmark's official reader beside ours) and they differ; "ask again" for every request.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from themis_dagster.explorer import ui
from themis_dagster.explorer.answers import judge_exchanges, options, shared_context
from themis_dagster.explorer.formatting import plain
from themis_dagster.warehouse.read.drilldown import ItemReading, JudgedItem, SentRequest

TICK = "✓"


def options_table(item: JudgedItem) -> pd.DataFrame | None:
    """The item's options with their logprobs and marks (None: a free reply, no options)."""
    found = options(item)
    if not found:
        return None
    return pd.DataFrame(
        {
            "option": [o.key for o in found],
            "answer": [o.text.strip() for o in found],
            "logprob": [plain(o.logprob) for o in found],
            "chosen": [TICK if o.chosen else "" for o in found],
            "correct": [TICK if o.correct else "" for o in found],
            "stereotyped": [TICK if o.stereotyped else "" for o in found],
        }
    )


def summary_line(item: JudgedItem) -> str:
    """The item in one line: id, subset, outcome, score, parse and refusal status."""
    parts = [
        f"**{item.item_id}**",
        f"subset {item.subset or '—'}",
        f"outcome **{item.outcome or '—'}**",
        f"score {plain(item.score)}",
        "parsed" if item.parsed else "could not be interpreted",
    ]
    if item.refused:
        parts.append("refused (its metrics' answered-only variants leave it out)")
    return " · ".join(parts)


def render_item(
    item: JudgedItem,
    model: str,
    task: str,
    judge_prompt: Any = None,
    readings: list[ItemReading] | None = None,
) -> None:
    """The item's panel; ``judge_prompt(judge, reply, texts)`` finds what a judge saw (the request cache)."""
    st.markdown(summary_line(item))
    table = options_table(item)
    context = shared_context(item)
    if table is not None:
        if context is not None:
            st.text("context (shared by every option):")
            st.code(context or "(empty: each option scored after the prefix token)", language=None, wrap_lines=True)
        st.table(table, hide_index=True)  # a few rows: plain text a reader (and a browser test) can select
        st.caption(
            "chosen: the model's answer · correct: the benchmark's label · stereotyped: the answer the metric "
            "counts as the stereotype (where the task records one)"
        )
        scored = [r for r in item.requests if r.request_type == "loglikelihood"]
        if scored:  # the playground scores the item's options again beside the stored logprobs
            _ask_again(scored[0], model, task)
    for request in item.requests:
        _request(request, model, task, scored_above=table is not None and request.request_type == "loglikelihood")
    for exchange in judge_exchanges(item):
        st.markdown(
            f"**Judge {exchange.judge}** on **{exchange.question}**: verdict **{exchange.verdict or '—'}** "
            f"({exchange.status or 'no status'})"
        )
        judged = [
            text for r in item.requests for text in (r.sent, r.reply) if text and r.request_type != "loglikelihood"
        ]
        prompt = (
            judge_prompt(exchange.judge, exchange.reply, judged) if judge_prompt and exchange.reply and judged else None
        )
        left, right = st.columns(2)
        left.text("the judge's prompt:")
        left.code(prompt or "(not in the request cache any more)", language=None, wrap_lines=True)
        right.text("the judge's reply:")
        right.code(exchange.reply or "", language=None, wrap_lines=True)
    if readings:
        _readings(readings)
    if item.detail:
        with st.expander("The task's record of this judgment (detail)"):
            st.json(item.detail, expanded=True)


def _request(request: SentRequest, model: str, task: str, *, scored_above: bool) -> None:
    if scored_above:  # a loglikelihood option: its text and logprob are in the table above
        if request.error:
            st.error(f"{request.request_id}: engine error: {request.error}")
        return
    kind = request.request_type or "request"
    st.markdown(f"**{request.request_id}** · {kind}" + (f" · template {request.template}" if request.template else ""))
    if request.request_type == "loglikelihood":
        st.text("context:")
        st.code(request.context or "(empty: after the prefix token)", language=None, wrap_lines=True)
        st.text("continuation (scored):")
        st.code(request.continuation or "", language=None, wrap_lines=True)
        st.markdown(f"logprob **{plain(request.logprob)}**, greedy {request.is_greedy}")
    else:
        left, right = st.columns(2)
        left.text("prompt as sent:")
        left.code(request.sent or "", language=None, wrap_lines=True)
        right.text("raw reply:")
        right.code(request.reply if request.reply is not None else "", language=None, wrap_lines=True)
        if request.reasoning:
            with st.expander(f"Reasoning ({len(request.reasoning):,} characters), before the reply"):
                st.code(request.reasoning, language=None, wrap_lines=True)
    if request.error:
        st.error(f"engine error: {request.error}")
    _ask_again(request, model, task)


def _ask_again(request: SentRequest, model: str, task: str) -> None:
    """The link that opens the request in the playground, to send it again beside its stored answer."""
    ui.page_link(
        "playground",
        "Ask again in the playground",
        icon=":material/replay:",
        model=model,
        task=task,
        request=request.request_id,
    )


def _readings(readings: list[ItemReading]) -> None:
    """Each reading of the reply side by side, where they differ (a benchmark's official reader and ours)."""
    differ = len({(r.outcome, r.score, r.parsed) for r in readings}) > 1
    st.markdown("**Readings of this reply**" + (": they differ" if differ else ": they agree"))
    columns = st.columns(len(readings))
    for column, reading in zip(columns, readings, strict=True):
        column.markdown(
            f"*{reading.reading}*: outcome **{reading.outcome or '—'}**, score {plain(reading.score)}, "
            + ("parsed" if reading.parsed else "could not be interpreted")
        )
