"""`themis import iat`: published replies are scored by the same parser and metrics, or rejected whole."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import MIRROR, requires_mirror
from themis_dagster.cli import main

GPT4O = MIRROR / "iat" / "reference_results" / "gpt4o"


@requires_mirror
def test_published_replies_are_imported_and_scored(import_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(GPT4O / "gpt4o_age_replication.csv"), str(GPT4O / "gpt4o_racism_instruction1.csv")]
    assert main(["import", "iat", "--model", "gpt-4o-sample", *files]) == 0
    assert "(new model)" in capsys.readouterr().out
    discovered = yaml.safe_load((import_env / "discovered.yaml").read_text())
    assert discovered["models"][0]["id"] == "gpt-4o-sample"
    assert discovered["models"][0]["source"]["kind"] == "imported"
    with duckdb.connect(str(import_env / "w.duckdb"), read_only=True) as conn:
        counts = conn.execute(
            "SELECT count(*) FROM responses WHERE model = 'gpt-4o-sample' AND task = 'iat'"
        ).fetchone()
        headline = dict(conn.execute(
            "SELECT metric, n FROM metrics WHERE model = 'gpt-4o-sample' AND task = 'iat' AND subset IS NULL"
        ).fetchall())  # fmt: skip
        board = conn.execute("SELECT count(*) FROM leaderboard WHERE model = 'gpt-4o-sample'").fetchone()
    assert counts == (100,)
    assert headline["parse_success_rate"] == 100 and headline["d_score"] >= 95
    assert board is not None and board[0] >= 1
    # importing again replaces the rows instead of duplicating them, and keeps the registration
    assert main(["import", "iat", "--model", "gpt-4o-sample", *files]) == 0
    assert "(new model)" not in capsys.readouterr().out
    with duckdb.connect(str(import_env / "w.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM judgments WHERE model = 'gpt-4o-sample'").fetchone() == (100,)


@requires_mirror
def test_bad_file_is_rejected_and_nothing_is_written(import_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = import_env / "bad.csv"
    bad.write_text("model,category,dataset,response\nx,race,no_such_set,hello\n")
    assert main(["import", "iat", "--model", "someone", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "nothing was written" in err and "bad.csv" in err
    assert not (import_env / "w.duckdb").exists()
    assert not (import_env / "discovered.yaml").exists()


def test_invalid_model_id_is_rejected(import_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "iat", "--model", "Bad|Id", "x.csv"]) == 2
    assert "invalid model id" in capsys.readouterr().err
