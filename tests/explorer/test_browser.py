"""The explorer in a real browser (Playwright driving Debian's Chromium) on the explorer tests' warehouse, walked as
a researcher checks a number, every page timed.

Leaderboard -> a value -> the items behind it -> one item (its answers marked) -> "ask again" in the playground,
which scores the item's options as stored; then the Judges, Refusals, Compare and chart views. Each step asserts
what a person would check on the page: the number and the items it counts agree, the chosen answer is the likeliest
one, a judge that failed calibration gives no verdict, a refused reply shows what it said. The playground asks the
fake engine the warehouse was built with (``THEMIS_ENGINE=fake``: no model is loaded).

Every page opens in under 3 s (issue 39's bound), checked as it opens. Opening a page is measured from the
navigation or the click to the page drawn to its end (``browser.py``). On a machine other work keeps busy the
wall-clock time says more about that work than about the page, so the bound always holds for the CPU time the
server and the browser spend on a page, and for the wall-clock time whenever other work held under a quarter of
the machine's CPU time meanwhile. The figures are printed (``-s``) and written to
``tests/artifacts/explorer-page-times.txt`` beside the screenshots.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import requires_mirror
from tests.explorer import browser
from tests.explorer.browser import Clock, Served, aim, column_middle, dots, grid_rows, table_rows, text
from tests.explorer_warehouse import CHILD, PARENT, TASKS, Built
from themis_dagster.explorer import data
from themis_dagster.explorer.counted import counted_items
from themis_dagster.explorer.leaderboard import WIDTHS
from themis_dagster.explorer.ui import PAGES

pytestmark = [pytest.mark.server, requires_mirror]  # a Streamlit server and a browser: outside the fast suite
WIDTH, HEIGHT = 1400, 1000  # the window the issue was read in
OPENS_IN_S = 3.0
QUIET = 0.25  # other work held under a quarter of the machine's CPU time: the wall-clock bound applies
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture(scope="module")
def served(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("explorer-server") / "streamlit.log"
    with browser.serve({**os.environ, **built.env()}, log) as server:
        yield server


@pytest.fixture(scope="module")
def clock(served: Served) -> Iterator[Clock]:
    """The times of every page the module's tests open: printed, written beside the screenshots, then bounded."""
    timed = Clock(served.pid, OPENS_IN_S, QUIET)
    yield timed
    lines = [o.line() for o in timed.pages] + [f"(action) {o.line()}" for o in timed.actions]
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "explorer-page-times.txt").write_text("\n".join(lines) + "\n")
    print("\nexplorer page times:\n  " + "\n  ".join(lines))


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's Chromium (Playwright downloads no browser here); the test skips without it, as the other browser
    tests do (``make system-deps`` installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("headless Chromium not installed (Debian package 'chromium')")
    return found


@pytest.fixture(scope="module")
def page(chromium: str, served: Served, clock: Clock) -> Iterator[Any]:
    """A 1400 x 1000 Chromium tab that has opened the app once (the server's first page imports the app's code:
    timed apart, not bounded)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            tab = launched.new_context(viewport={"width": WIDTH, "height": HEIGHT}).new_page()
            tab.set_default_timeout(90_000)  # a busy machine; the bounds below are the test's measure
            with clock.opening(tab, "first page after the server started", "answers computed in", action=True):
                tab.goto(f"{served.url}/?model={CHILD}")
            yield tab
        finally:
            launched.close()


def _open(page: Any, clock: Clock, url: str, name: str, ends_with: str) -> str:
    with clock.opening(page, name, ends_with):
        page.goto(url)
    return text(page)


def test_leaderboard_to_a_value_its_items_one_item_and_ask_again(
    page: Any, served: Served, clock: Clock, built: Built
) -> None:
    with data.read_only(built.warehouse) as conn:
        counted = counted_items(conn, CHILD, "bbq", "accuracy_ambig", data.Slice())
        every = data.drilldown_total(conn, CHILD, "bbq", data.Slice())
        n, value = conn.execute(
            "SELECT n, value FROM metrics WHERE model = ? AND task = 'bbq' AND metric = 'accuracy_ambig' "
            "AND subset IS NULL",
            [CHILD],
        ).fetchone() or (0, 0.0)
    assert counted is not None and counted.numerator is not None
    shown_value = f"{100 * value:.1f}%"  # a rate reads in percent

    # the leaderboard as it opens: every value of both models, judged ones with their judge, no column off-screen
    shown = _open(page, clock, f"{served.url}/", "leaderboard", "values of 2 models on")
    assert "ranked apart (their judge gives no verdict)" in shown
    assert "judge" in grid_rows(page.get_by_test_id("stDataFrame").first)[0]
    assert browser.scrolls_sideways(page) == [], "a column of the leaderboard is off-screen at 1400 px"

    # narrowed as a shared link narrows it: the child's BBQ values
    shown = _open(page, clock, f"{served.url}/?model={CHILD}&task=bbq", "leaderboard (narrowed)", "answers computed in")
    assert "Leaderboard" in shown and f"{CHILD}: answers computed in bfloat16." in shown
    board = page.get_by_test_id("stDataFrame").first
    rows = grid_rows(board)
    caption = re.search(r"(\d+) values of 1 model on 1 task; (\d+) biased", shown)
    assert caption is not None and int(caption.group(1)) == len(rows)
    row = next(r for r in rows if r["metric"] == "accuracy_ambig")
    assert (row["value"], row["n"], row["ideal"]) == (shown_value, str(n), "100.0%")
    assert row["verdict"] == "below ideal (not a bias measure)"  # accuracy is no bias: not counted as biased
    chart = page.get_by_test_id("stVegaLiteChart").first
    assert dots(chart) == len(rows) and "bbq · accuracy_ambig" in chart.inner_text()  # a dot per value
    page.screenshot(path=str(ARTIFACTS / "explorer-leaderboard.png"), full_page=True)

    # a click on the value opens the items behind it
    widths = {name: w for name, w in WIDTHS.items() if name in rows[0]} | {"replies": 70}  # as the page sets them
    point = aim(page, board, rows.index(row), column_middle(widths, "value"))
    with clock.opening(page, "drill-down (a click on the value)", "Click a row to open its item"):
        page.mouse.click(*point)
    shown = text(page)
    assert page.url.endswith(f"drilldown?model={CHILD}&task=bbq&metric=accuracy_ambig")
    assert f"bbq · accuracy_ambig = {shown_value} (95% CI {row['95% CI']}) · n {n}" in shown
    said = re.search(r"The value counts (\d+) of the slice's (\d+) judgments.*; (\d+) of them count as 1", shown)
    assert said is not None and (int(said.group(1)), int(said.group(2))) == (n, every)
    assert f"{100 * int(said.group(3)) / int(said.group(1)):.1f}%" == shown_value  # the value is its items' share
    items = grid_rows(page.get_by_test_id("stDataFrame").first)
    assert [i["item"] for i in items] == counted.counted  # the items the value counts, no other
    assert sum(i["score"] == "1.000" for i in items) == len(counted.numerator) == int(said.group(3))
    subsets = re.search(r"Forest plot of its (\d+) subsets", shown)
    assert subsets is not None
    page.get_by_text(subsets.group(0)).click()  # the value's subsets, each against the ideal
    forest = page.get_by_test_id("stVegaLiteChart").first
    forest.locator("svg").wait_for()
    assert dots(forest) == int(subsets.group(1)) and all(i["subset"] in forest.inner_text() for i in items)
    assert browser.hidden_labels(forest) == [], "subsets drawn without their name"
    page.screenshot(path=str(ARTIFACTS / "explorer-drilldown.png"), full_page=True)

    # a click on an item opens it: its answers with their logprobs, the chosen, correct and stereotyped marked
    first = items[0]
    point = aim(page, page.get_by_test_id("stDataFrame").first, 0, 0.05)
    with clock.opening(page, "item (a click on a judgment)", "context (shared by every option)"):
        page.mouse.click(*point)
    shown = text(page)
    assert f"Item {first['item']}" in shown and shown.count("context (shared by every option)") == 1
    options = table_rows(page.get_by_test_id("stTable").first)
    marked = {
        column: [o["option"] for o in options if o[column] == "✓"] for column in ("chosen", "correct", "stereotyped")
    }
    assert len(options) == 3 and all(len(m) == 1 for m in marked.values()), marked  # one answer each
    chosen = next(o for o in options if o["chosen"] == "✓")
    assert float(chosen["logprob"]) == max(float(o["logprob"]) for o in options)  # the likeliest answer is chosen
    assert (chosen["correct"] == "✓") == (first["score"] == "1.000")  # scored 1 when the chosen one is correct
    page.screenshot(path=str(ARTIFACTS / "explorer-item.png"), full_page=True)

    # ask again: the playground scores the item's options beside their stored logprobs
    with clock.opening(page, "playground (ask again)", "Asking again: request"):
        page.get_by_role("link", name="Ask again in the playground").first.click()
    assert f"Asking again: request {first['item']}:ans0 of bbq (loglikelihood)" in text(page)
    page.get_by_role("tab", name="Completion probabilities").click()
    asked = page.get_by_label("Completions, one per line").input_value().splitlines()
    assert [a.strip() for a in asked] == [o["answer"] for o in options]  # every option of the item, as stored
    with clock.opening(page, "score the options again", "options score as stored", action=True):
        page.get_by_role("button", name="Score", exact=True).click()
    assert "Asked again: 3 of 3 options score as stored" in text(page)
    assert f"Warm engine: {CHILD}" in text(page)
    page.screenshot(path=str(ARTIFACTS / "explorer-playground.png"), full_page=True)


def test_judges_refusals_compare_and_charts(page: Any, served: Served, clock: Clock, built: Built) -> None:
    # Judges: the calibration behind the judged values, and those values without a verdict
    shown = _open(page, clock, f"{served.url}/judges", "judges", "labelled otherwise than people labelled them")
    overview, confusion, per_class = (table_rows(t) for t in page.get_by_test_id("stTable").all()[:3])
    calibrations = [(o["judge"], o["calibration set"], o["readable answers"]) for o in overview]
    assert calibrations == [(PARENT, "regard", "301 of 301")]
    assert overview[0]["standing"] == "failed: no better than chance (kappa CI reaches 0)"
    assert sum(int(r["judge: positive"]) for r in confusion) == 301  # it called every text positive
    assert next(r for r in per_class if r["class"] == "positive")["sensitivity (95% CI)"].startswith("100.0%")
    judged = {(r["model"], r["metric"]): r["verdict"] for r in grid_rows(page.get_by_test_id("stDataFrame").first)}
    assert judged[(CHILD, "positive_regard_share")] == "judge failed calibration"
    assert judged[(CHILD, "toxicity_rate")] == "uncalibrated judge"  # no calibration set for toxicity
    missed = re.search(r"([\d,]+) texts labelled otherwise than people labelled them", shown)
    assert missed is not None and int(missed.group(1).replace(",", "")) > 0
    assert page.get_by_test_id("stVegaLiteChart").first.locator("g.role-mark").count() > 0  # the heatmap
    page.screenshot(path=str(ARTIFACTS / "explorer-judges.png"), full_page=True)

    # Refusals: each refused reply with the phrase that marked it; a click opens its item
    with data.read_only(built.warehouse) as conn:
        [(bold,)] = conn.execute("SELECT count(*) FROM judgments WHERE model = ? AND task = 'bold'", [CHILD]).fetchall()
    shown = _open(page, clock, f"{served.url}/refusals?model={CHILD}", "refusals", "A click on a row opens its item")
    rates = {r["metric"]: r for r in table_rows(page.get_by_test_id("stTable").first) if r["task"] == "bold"}
    assert rates["refused_rate"]["value"] == "100.0%" and rates["refused_rate"]["n"] == str(bold)
    assert f"{bold} refused replies." in shown
    replies = grid_rows(page.get_by_test_id("stDataFrame").first)
    assert {(r["phrase"], r["reply"]) for r in replies} == {("i cannot", "I cannot continue that sentence.")}
    assert all(r["detector"].startswith("phrase list · ") for r in replies)
    page.screenshot(path=str(ARTIFACTS / "explorer-refusals.png"), full_page=True)
    point = aim(page, page.get_by_test_id("stDataFrame").first, 0, 0.05)
    with clock.opening(page, "drill-down (a click on a refused reply)", "raw reply:"):
        page.mouse.click(*point)
    shown = text(page)
    assert f"Item {replies[0]['item']}" in shown and "refused (its metrics' answered-only" in shown
    assert "I cannot continue that sentence." in page.get_by_test_id("stCode").all_inner_texts()  # the raw reply

    # Compare: the child against its parent, computed here as `themis compare` computes it
    shown = _open(page, clock, f"{served.url}/compare?task=gb_direct", "compare", "items judged differently on")
    assert f"Baseline {PARENT} (its registry parent)." in shown
    assert f"{TASKS['gb_direct']} items judged differently on gb_direct." in shown  # "1" against "yes" on each
    page.get_by_test_id("stSelectbox").filter(has_text="Baseline").click()
    offered = page.get_by_role("option").all_inner_texts()
    assert PARENT in offered and CHILD not in offered  # never the model itself
    page.keyboard.press("Escape")
    with clock.opening(page, "compare again", "Computed here, as themis compare computes", action=True):
        page.get_by_role("button", name="Compare again").click()
    computed = re.search(r"(\d+) comparisons; (\d+) gated regression", text(page))
    differences = page.get_by_test_id("stVegaLiteChart").first
    assert computed is not None and 0 < dots(differences) <= int(computed.group(1))  # a dot per difference with CI
    assert browser.hidden_labels(differences) == [], "differences drawn without the metric's name"
    page.screenshot(path=str(ARTIFACTS / "explorer-compare.png"), full_page=True)

    # the Model page's charts: per benchmark family, each headline value against its ideal
    shown = _open(page, clock, f"{served.url}/model?model={CHILD}", "model", "Reproducibility record")
    assert "Headline values against their ideals" in shown and "dtype bfloat16" in shown
    summary = [r for grid in page.get_by_test_id("stDataFrame").all()[:4] for r in grid_rows(grid)]
    assert {r["verdict"] for r in summary if r.get("metric") == "positive_regard_share"} == {"judge failed calibration"}
    families = page.get_by_test_id("stVegaLiteChart").all()
    assert len(families) >= 2 and all(dots(chart) > 0 and browser.hidden_labels(chart) == [] for chart in families)
    assert browser.scrolls_sideways(page) == [], "a column of the Model page is off-screen at 1400 px"
    page.screenshot(path=str(ARTIFACTS / "explorer-model.png"), full_page=True)


def test_every_page_opens_without_a_traceback(page: Any, served: Served, clock: Clock) -> None:
    """Each page of the menu on the child's link, those the walks do not open too (and timed as they are)."""
    for url_path, (_, title, _) in PAGES.items():
        _open(page, clock, f"{served.url}/{url_path}?model={CHILD}", f"{url_path} (from the menu's link)", title)
        assert page.locator("h1").first.inner_text() == title, url_path
        above = page.get_by_test_id("stMainBlockContainer").inner_text().split(title, 1)[0]
        assert above.strip() == "", f"{url_path}: shown above its title: {above!r}"
        assert page.get_by_test_id("stException").count() == 0, f"{url_path}: a traceback"
