"""Perturbations: a task asked again with only who is spoken of changed, its effect and the items that changed.

A variant partition (``<task>__<perturbation>``, docs/counterfactuals.md) rewrites the task's
prompts (gendered words, first names, identity descriptors) and keeps every item id, so each item
pairs with the original. The page shows the variant's paired effects (``perturbation_effects``:
each headline metric's difference with its CI and Holm's p, over the changed items and over all),
how many items the perturbation changed and left unchanged, then the items (those it changed, or
every one; those judged differently) and opens one: the original and the perturbed prompt side by
side with both replies and both judgments. ``?model=...&task=<variant>&scope=...&every=1&differs=1&item=...``.
"""

from __future__ import annotations

import math

import duckdb
import pandas as pd
import streamlit as st

from themis_dagster.explorer import browse, charts, ui
from themis_dagster.explorer.compare import chart_rows
from themis_dagster.explorer.formatting import MISSING, plain, text
from themis_dagster.warehouse.read.comparisons import perturbation_effect_frame
from themis_dagster.warehouse.read.drilldown import JudgedItem, SentRequest, Slice, drilldown_page
from themis_dagster.warehouse.read.perturbed import PerturbedItem, Variant, perturbed_items, variants

PAGE_SIZE = 50
SCOPES = {"changed": "the items it changed", "all": "every item"}
EFFECT_COLUMNS = ["scope", "subset", "metric", "original_value", "value", "difference", "ci_low", "ci_high",
                  "p_value", "p_adjusted", "n_pairs", "test"]  # fmt: skip


def items_frame(found: list[PerturbedItem], model: str, variant: str) -> pd.DataFrame:
    """The paired items as the list shows them, each row linking to the item opened."""
    return pd.DataFrame(
        {
            "item": [i.item_id for i in found],
            "subset": [i.subset or MISSING for i in found],
            "changed": [text(i.changed) for i in found],
            "original outcome": [i.original_outcome or MISSING for i in found],
            "original score": [plain(i.original_score) for i in found],
            "perturbed outcome": [i.perturbed_outcome or MISSING for i in found],
            "perturbed score": [plain(i.perturbed_score) for i in found],
            "judged differently": [text(i.differs) for i in found],
            browse.OPEN: [ui.href("perturbations", model=model, task=variant, item=i.item_id) for i in found],
        }
    )


def effects_frame(effects: pd.DataFrame) -> pd.DataFrame:
    """The variant's effects, numbers as text (subset None: the headline, shown as "—")."""
    shown = effects.reindex(columns=EFFECT_COLUMNS).astype(object)
    for column in ("original_value", "value", "difference", "ci_low", "ci_high", "p_value", "p_adjusted"):
        shown[column] = [plain(v) for v in shown[column]]
    shown["subset"] = [MISSING if s is None or (isinstance(s, float) and math.isnan(s)) else s for s in shown["subset"]]
    return shown


def _shown(request: SentRequest | None) -> str:
    if request is None:
        return MISSING
    if request.request_type == "loglikelihood":
        return f"{request.context or ''}⟨{request.continuation or ''}⟩"
    return request.sent or MISSING


def _answer(request: SentRequest | None) -> str:
    if request is None:
        return MISSING
    if request.error:
        return f"error: {request.error}"
    if request.request_type == "loglikelihood":
        return f"logprob {plain(request.logprob)}"
    return request.reply or MISSING


def _item(conn: duckdb.DuckDBPyConnection, model: str, variant: Variant, item_id: str) -> None:
    """The original and the perturbed item side by side: each request's text and answer, both judgments."""
    sides: list[JudgedItem] = []
    for task in (variant.base_task, variant.task):
        page = drilldown_page(conn, model, task, Slice(), limit=1, item_ids=[item_id])
        if not page.items:
            ui.fail(f"unknown item {item_id!r}: {model} has no such item on {task}")
        sides.append(page.items[0])
    original, perturbed = sides
    st.subheader(item_id)
    before = {r.request_id: r for r in original.requests}
    after = {r.request_id: r for r in perturbed.requests}
    changed = [rid for rid in after if _shown(after[rid]) != _shown(before.get(rid))]
    st.markdown(
        f"**{variant.perturbation}** rewrote {len(changed)} of the item's {len(after)} requests"
        + (f" · subset {original.subset}" if original.subset else "")
    )
    for column, side, item, task in zip(
        st.columns(2), ("original", "perturbed"), sides, (variant.base_task, variant.task), strict=True
    ):
        with column:
            st.markdown(f"**{side}** ({task}): outcome **{item.outcome or MISSING}** · score {plain(item.score)}")
            ui.page_link("drilldown", "In the drill-down", icon=":material/manage_search:", model=model, task=task,
                         item=item_id)  # fmt: skip
    for request_id in sorted(after):
        mark = " (rewritten)" if request_id in changed else " (unchanged)"
        st.markdown(f"`{request_id}`{mark}")
        for column, requests in zip(st.columns(2), (before, after), strict=True):
            with column:
                request = requests.get(request_id)
                st.code(_shown(request), language=None, wrap_lines=True)
                st.caption(_answer(request))
    ui.page_link("perturbations", "Back to the items", icon=":material/arrow_back:", model=model, task=variant.task)


def _choices(conn: duckdb.DuckDBPyConnection) -> tuple[str, Variant | None]:
    model = browse.model(conn)
    found = variants(conn, model)
    if not found:
        ui.set_params(model=model)
        why = "this warehouse has no perturbation_effects view" if found is None else "none has measured effects"
        st.info(f"No perturbed variant of {model}'s tasks ({why}; docs/counterfactuals.md).")
        return model, None
    by_name = {variant.task: variant for variant in found}
    name = ui.choose("Variant", list(by_name), ui.param("task"), key="task", name="variant")
    ui.set_params(model=model, task=name)
    return model, by_name[name]


def _effects(conn: duckdb.DuckDBPyConnection, model: str, variant: Variant) -> None:
    """The variant's paired effects over the scope the URL names (the changed items by default)."""
    scope = ui.param("scope") or "changed"
    if scope not in SCOPES:
        ui.fail(f"unknown scope {scope!r}: {', '.join(SCOPES)}")
    effects = perturbation_effect_frame(conn, model, variant.task).to_pandas()
    st.markdown(
        f"**{variant.perturbation}** on **{variant.base_task}**: {variant.n_changed:,} items changed, "
        f"{variant.n_unchanged:,} left unchanged (counted, never compared as changed)."
    )
    chosen = st.radio("Effect over", list(SCOPES), index=list(SCOPES).index(scope), format_func=SCOPES.__getitem__,
                      horizontal=True, key="scope")  # fmt: skip
    ui.set_params(scope=None if chosen == "changed" else chosen)
    in_scope = effects[effects["scope"] == chosen]
    drawn = chart_rows(in_scope.assign(task=variant.perturbation))  # labelled "<perturbation> · <metric>"
    if not drawn.empty:
        st.altair_chart(charts.with_rows(charts.differences(drawn), len(drawn)))
        st.caption("Each headline metric's difference, perturbed minus original, with its paired 95% CI.")
    st.dataframe(effects_frame(in_scope), hide_index=True, width="stretch", key="effects")


def _items(conn: duckdb.DuckDBPyConnection, model: str, variant: Variant) -> None:
    """A page of the items both sides judged (those the perturbation changed, or every one), each opening."""
    columns = st.columns(2)
    with columns[0]:
        every = browse.switch("every", "Every item (not only those it changed)", "every")
    with columns[1]:
        differing = browse.switch("differs", "Only items judged differently", "differs")
    chosen = {"changed_only": not every, "differing": differing}
    total, _ = perturbed_items(conn, model, variant.base_task, variant.task, limit=1, **chosen)
    number = browse.page_number(total, PAGE_SIZE)
    ui.set_params(every="1" if every else None, differs="1" if differing else None, page=number if number > 1 else None)
    offset = (number - 1) * PAGE_SIZE
    _, found = perturbed_items(conn, model, variant.base_task, variant.task, limit=PAGE_SIZE, offset=offset, **chosen)
    browse.counted(total, number, PAGE_SIZE, "items")
    if found:
        browse.openable(items_frame(found, model, variant.task), "perturbed-items")
    else:
        st.info("No item matches these filters.")


def render() -> None:
    ui.header("Perturbations", "A task asked again with only who is spoken of changed (docs/counterfactuals.md).")
    with ui.warehouse() as conn:
        model, variant = _choices(conn)
        item = ui.param("item")
        if variant is not None and item is not None:
            _item(conn, model, variant, item)
        elif variant is not None:
            _effects(conn, model, variant)
            _items(conn, model, variant)


if __name__ == "__main__":
    render()
