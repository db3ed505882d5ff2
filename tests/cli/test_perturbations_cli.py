"""``themis perturbations``: a model's variants measured against their tasks from the warehouse, and bad input."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from tests.comparisons.test_perturbation_effects import ORIGINAL, PERTURBED
from themis_dagster.cli import main
from themis_dagster.exchange import Request
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import to_frame
from themis_dagster.warehouse.schema import ensure_schema

MODEL = "smollm2-135m-instruct"


def test_the_variants_effects_are_measured_and_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "w.duckdb"
    monkeypatch.setenv("THEMIS_WAREHOUSE", str(warehouse))
    requests = [Request.loglikelihood(f"sentence {i} about him", " x", f"i{i:02d}:a", f"i{i:02d}") for i in range(12)]
    swapped = [replace(r, context=f"sentence {i} about her") if i < 10 else r for i, r in enumerate(requests)]
    with duckdb.connect(str(warehouse)) as conn:
        ensure_schema(conn)
        for task, prompts, judged in (("winobias", requests, ORIGINAL), ("winobias__gender_swap", swapped, PERTURBED)):
            append_rows(conn, "prompts", to_frame("prompts", prompts, model=MODEL, task=task))
            append_rows(conn, "judgments", to_frame("judgments", judged, model=MODEL, task=task))
    assert main(["perturbations", MODEL]) == 0
    out = capsys.readouterr().out
    assert "winobias__gender_swap" in out and "mcnemar_exact" in out and "changed" in out
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        found = conn.execute("SELECT count(*), min(n_changed) FROM perturbation_effects").fetchone()
    assert found is not None and found[0] > 0 and found[1] == 10
    assert main(["perturbations", MODEL, "--task", "winobias"]) == 2
    assert "winobias is not a variant" in capsys.readouterr().err
    assert main(["perturbations", MODEL, "--task", "winogender__identity"]) == 2
    assert "has no judgments on winogender" in capsys.readouterr().err
