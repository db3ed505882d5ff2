"""The explorer's charts (Altair, drawn by Streamlit): values with their CIs against the ideal, subsets, paired
differences and checkpoint trends.

Each takes a plain frame and returns a chart, so the pages stay short and the charts can be tested
without a browser. A value is a dot, its 95% CI a bar, the metric's declared ideal a tick (or a
vertical rule); a value whose CI excludes the ideal is drawn in the colour of its verdict.
"""

from __future__ import annotations

from typing import TypeAlias, cast

import altair as alt
import pandas as pd

Drawn: TypeAlias = alt.Chart | alt.LayerChart | alt.FacetChart

TONES = {"bad": "#c0392b", "good": "#2e7d32", "unsure": "#b7791f", "none": "#777777"}
WIDTH = 420
ROW = 22  # pixels per row of a dot-and-CI chart
ROW_PX, AXIS_PX = 28, 60  # a labelled row, and an x axis with its title (with_rows)


def _tone_scale() -> alt.Scale:
    return alt.Scale(domain=list(TONES), range=list(TONES.values()))


def dot_ci(frame: pd.DataFrame, title: str = "") -> Drawn:
    """Each row (``label``) a dot at ``value`` with its CI (``ci_low``..``ci_high``) and its ``ideal`` as a tick,
    on an axis of its own (metrics have their own units); ``tone`` colours the dot, ``verdict`` and ``shown`` (the
    value as text) go to the tooltip. Columns: label, value, ci_low, ci_high, ideal, tone, verdict, shown."""
    data = frame.assign(ideal_shown=frame["ideal"].map(lambda v: "none declared" if pd.isna(v) else f"{v:g}"))
    tooltip = [
        alt.Tooltip("label:N", title="metric"),
        alt.Tooltip("shown:N", title="value"),
        alt.Tooltip("ci:N", title="95% CI"),
        alt.Tooltip("ideal_shown:N", title="ideal"),
        alt.Tooltip("verdict:N"),
    ]
    base = alt.Chart().encode(x=alt.X("value:Q", title=None, scale=alt.Scale(zero=False)))
    bars = base.mark_rule(strokeWidth=2, color="#888").encode(x="ci_low:Q", x2="ci_high:Q")
    ideal = alt.Chart().mark_tick(color="#1565c0", thickness=2, size=16).encode(x="ideal:Q")
    dots = base.mark_point(filled=True, size=60).encode(
        color=alt.Color("tone:N", scale=_tone_scale(), legend=None), tooltip=tooltip
    )
    layered = alt.layer(bars, ideal, dots, data=data).properties(width=WIDTH, height=ROW)
    row = alt.Row(
        "label:N",
        title=None,
        sort=list(data["label"]),
        header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=320, labelPadding=6),
    )
    chart = cast(Drawn, layered.facet(row=row, spacing=2).resolve_scale(x="independent"))
    return chart.properties(title=title) if title else chart


def models_dot_ci(frame: pd.DataFrame) -> Drawn:
    """As :func:`dot_ci` with several models a row, one colour each (column ``model``)."""
    data = frame.assign(ideal_shown=frame["ideal"].map(lambda v: "none declared" if pd.isna(v) else f"{v:g}"))
    tooltip = [
        "model:N",
        alt.Tooltip("label:N", title="metric"),
        alt.Tooltip("shown:N", title="value"),
        alt.Tooltip("ci:N", title="95% CI"),
        alt.Tooltip("ideal_shown:N", title="ideal"),
        "verdict:N",
    ]
    offset = alt.YOffset("model:N")
    base = alt.Chart().encode(x=alt.X("value:Q", title=None, scale=alt.Scale(zero=False)), yOffset=offset)
    bars = base.mark_rule(strokeWidth=2).encode(x="ci_low:Q", x2="ci_high:Q", color="model:N")
    dots = base.mark_point(filled=True, size=50).encode(color="model:N", tooltip=tooltip)
    ideal = alt.Chart().mark_tick(color="#1565c0", thickness=2, size=20).encode(x="ideal:Q")
    height = ROW + 6 * max(frame["model"].nunique(), 1)
    layered = alt.layer(bars, ideal, dots, data=data).properties(width=WIDTH, height=height)
    row = alt.Row("label:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=320))
    return cast(Drawn, layered.facet(row=row, spacing=2).resolve_scale(x="independent"))


def _ideal_rule(ideal: float | None, axis: str) -> list[alt.Chart]:
    """The declared ideal as a dashed rule across ``axis`` ("x" or "y"); none where no ideal is declared."""
    if ideal is None:
        return []
    rule = alt.Chart(pd.DataFrame({"ideal": [ideal]})).mark_rule(color="#1565c0", strokeDash=[4, 3])
    return [rule.encode(**{axis: "ideal:Q"})]


def forest(frame: pd.DataFrame, ideal: float | None, title: str = "") -> Drawn:
    """A forest plot of one metric's subsets: a row per ``subset``, dot and CI on one shared axis, the ideal a
    vertical rule. Columns: subset, value, ci_low, ci_high, tone, shown, ci, n."""
    order = list(frame.sort_values("value", ascending=False)["subset"])
    y = alt.Y("subset:N", sort=order, title=None, axis=alt.Axis(labelLimit=260))
    tooltip = ["subset:N", alt.Tooltip("shown:N", title="value"), alt.Tooltip("ci:N", title="95% CI"), "n:Q"]
    base = alt.Chart(frame).encode(y=y)
    bars = base.mark_rule(strokeWidth=2, color="#888").encode(x=alt.X("ci_low:Q", title=title or None), x2="ci_high:Q")
    dots = base.mark_point(filled=True, size=60).encode(
        x=alt.X("value:Q", scale=alt.Scale(zero=False)),
        color=alt.Color("tone:N", scale=_tone_scale(), legend=None),
        tooltip=tooltip,
    )
    return alt.layer(bars, dots, *_ideal_rule(ideal, "x")).properties(
        width=WIDTH + 180, height=max(60, ROW * len(frame))
    )


def differences(frame: pd.DataFrame) -> Drawn:
    """Paired differences (model - baseline) with their CIs, 0 a rule; a difference whose Holm-adjusted p is at
    most 0.05 is drawn red. Columns: label, difference, ci_low, ci_high, p_adjusted, significant, test, n_pairs."""
    y = alt.Y("label:N", sort=list(frame["label"]), title=None, axis=alt.Axis(labelLimit=320))
    tooltip = [
        "label:N",
        alt.Tooltip("difference:Q", format="+.4f"),
        alt.Tooltip("ci_low:Q", format="+.4f"),
        alt.Tooltip("ci_high:Q", format="+.4f"),
        alt.Tooltip("p_adjusted:Q", title="p (Holm)", format=".4f"),
        "test:N",
        "n_pairs:Q",
    ]
    base = alt.Chart(frame).encode(y=y)
    bars = base.mark_rule(strokeWidth=2, color="#888").encode(
        x=alt.X("ci_low:Q", title="difference (model − baseline), 95% CI"), x2="ci_high:Q"
    )
    colour = alt.Color(
        "significant:N",
        title="Holm p ≤ 0.05",
        scale=alt.Scale(domain=["yes", "no"], range=[TONES["bad"], TONES["none"]]),
    )
    dots = base.mark_point(filled=True, size=60).encode(x="difference:Q", color=colour, tooltip=tooltip)
    zero = alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="#1565c0").encode(x="zero:Q")
    return alt.layer(bars, zero, dots).properties(width=WIDTH + 180, height=max(60, ROW * len(frame)))


def trend(frame: pd.DataFrame, ideal: float | None, x_title: str = "checkpoint step") -> Drawn:
    """A metric across checkpoints: its value by ``step`` with the CI as a band, the ideal a dashed rule.
    Columns: step, model, value, ci_low, ci_high (and optionally significant: "*" marks a change whose p is small)."""
    base = alt.Chart(frame).encode(x=alt.X("step:Q", title=x_title))
    band = base.mark_area(opacity=0.2).encode(
        y=alt.Y("ci_low:Q", title="value", scale=alt.Scale(zero=False)), y2="ci_high:Q"
    )
    line = base.mark_line(point=True).encode(
        y="value:Q", tooltip=["model:N", "step:Q", alt.Tooltip("value:Q", format=".4f")]
    )
    return alt.layer(band, line, *_ideal_rule(ideal, "y")).properties(width=WIDTH + 180, height=220)


def with_rows(chart: Drawn, rows: int) -> Drawn:
    """``chart`` tall enough for each of its ``rows`` to show its label, with its x axis below them (Streamlit fits
    a whole chart, axis and title included, into its height: a few rows would be squashed)."""
    return chart.properties(height=ROW_PX * rows + AXIS_PX)


def _bars(frame: pd.DataFrame, height: alt.Step | int, **channels: object) -> Drawn:
    """Bars of ``frame`` with these encoding channels, as wide as the other one-axis charts."""
    return cast(Drawn, alt.Chart(frame).mark_bar().encode(**channels).properties(width=WIDTH + 180, height=height))


def _order(frame: pd.DataFrame, column: str) -> list[str]:
    """The column's values in their first order (the stored order of panels, categories and sources)."""
    return list(dict.fromkeys(frame[column]))


def shares(frame: pd.DataFrame) -> Drawn:
    """Each panel's shares as one stacked bar per source (the model's, and the reference's beneath it, paler), a
    colour per category in its order. Columns: panel, source, category, value, shown (the value as text), ci."""
    sources, categories = _order(frame, "source"), _order(frame, "category")
    return _bars(
        frame.assign(stack=frame["category"].map(categories.index)),
        alt.Step(12 * max(len(sources), 1)),
        y=alt.Y("panel:N", sort=_order(frame, "panel"), title=None, axis=alt.Axis(labelLimit=260)),
        yOffset=alt.YOffset("source:N", sort=sources),
        x=alt.X("value:Q", stack="zero", title="share", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("category:N", title=None, sort=categories),
        opacity=alt.Opacity("source:N", sort=sources, legend=None, scale=alt.Scale(range=[1.0, 0.45])),
        order=alt.Order("stack:Q"),
        tooltip=["panel:N", "source:N", "category:N", alt.Tooltip("shown:N", title="share"), alt.Tooltip("ci:N")],
    )


def distribution(frame: pd.DataFrame) -> Drawn:
    """One item's distribution beside each reference's: a group of bars per label (in order), one bar per source.
    Columns: label, source, value."""
    sources = _order(frame, "source")
    return _bars(
        frame,
        260,
        x=alt.X("label:N", sort=_order(frame, "label"), title=None, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("source:N", sort=sources),
        y=alt.Y("value:Q", title="share", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("source:N", sort=sources, title=None),
        tooltip=["label:N", "source:N", alt.Tooltip("value:Q", format=".3f")],
    )
