"""An imported model flows through the reports beside a model evaluated here: nothing fails to render.

``themis import bbq`` and ``themis import iat`` once ended in ``jinja2.exceptions.UndefinedError:
'dict object' has no attribute 'corrected'`` from the leaderboard page: a model that was not
evaluated on a column's task had a cell without it. Here the default model is evaluated on bbq,
bbq_generate and iat (fake engine), UnifiedQA's published BBQ predictions and the published GPT-4o
IAT replies are imported, and the reports job renders the leaderboard and every model's report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import MIRROR, requires_mirror
from themis_dagster.cli import main

PREDS = Path(__file__).parents[1] / "data" / "bbq_preds"
GPT4O = MIRROR / "iat" / "reference_results" / "gpt4o"


@requires_mirror
def test_imported_models_render_in_every_report(
    import_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = import_env / "reports"
    monkeypatch.setenv("THEMIS_REPORTS_DIR", str(reports))
    monkeypatch.setenv("THEMIS_EXPORTS_DIR", str(import_env / "exports"))
    monkeypatch.setenv("THEMIS_ENGINE", "fake")
    overrides = import_env / "overrides.yaml"
    overrides.write_text("bbq: {limit: 1}\nbbq_generate: {limit: 1}\niat: {iterations: 1, variations: [replication]}\n")
    monkeypatch.setenv("THEMIS_TASK_OVERRIDES", str(overrides))
    assert main(["run", "--task", "bbq", "--task", "bbq_generate", "--task", "iat", "--no-calibrate-judges"]) == 0
    bbq = ["import", "bbq", "--model", "unifiedqa-t5-11b-arc", "--column", "unifiedqa-t5-11b_pred_arc"]
    assert main([*bbq, str(PREDS / "preds_Age.jsonl"), str(PREDS / "preds_Religion.jsonl")]) == 0
    assert main(["import", "iat", "--model", "gpt-4o-published", *map(str, sorted(GPT4O.glob("*.csv")))]) == 0
    out = capsys.readouterr().out
    assert "scoring ok" in out and "FAILED" not in out
    board = (reports / "leaderboard.html").read_text()
    for model in ("smollm2-135m-instruct", "unifiedqa-t5-11b-arc", "gpt-4o-published"):
        assert model in board
        page = reports / model / "report.html"
        assert page.is_file() and model in page.read_text(), f"no report page for {model}"
    assert "not evaluated" in board  # each imported model has cells of tasks it was never run on
