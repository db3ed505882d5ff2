"""A user's (text, label) CSV, declared in calibration_sets.yaml, calibrates BOLD's toxicity judge through the
judge_calibration asset and corrects BOLD's judged toxicity_rate (fake engine, temporary DuckDB)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import requires_mirror
from tests.judging.user_set_flow import JUDGE, SET, calibration_rows, fake_toxicity
from themis_dagster.settings import PROJECT_ROOT


@requires_mirror
def test_a_users_csv_calibrates_the_toxicity_judge_and_corrects_toxicity_rate(tmp_path: Path) -> None:
    with (tmp_path / "toxicity.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(calibration_rows())
    declaration = {"name": SET, "task": "bold", "question": "toxicity", "path": "toxicity.csv",
                   "labels": ["non-toxic", "toxic"], "source": "labelled by hand for this test",
                   "license": "CC0-1.0", "label_names": {"0": "non-toxic", "1": "toxic"}}  # fmt: skip
    declared = tmp_path / "calibration_sets.yaml"
    declared.write_text(yaml.safe_dump({"calibration_sets": [declaration]}), encoding="utf-8")
    env = os.environ | {"THEMIS_CALIBRATION_SETS": str(declared), "DAGSTER_HOME": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "tests.judging.user_set_flow", str(tmp_path)],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]

    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as conn:
        labels = conn.execute(
            "SELECT text, human_label, judge_label FROM judge_calibration_labels WHERE calibration_set = ?", [SET]
        ).fetchall()
        sens = conn.execute(
            "SELECT value FROM judge_calibration_metrics WHERE calibration_set = ? AND metric = 'sensitivity' "
            "AND label = 'toxic'",
            [SET],
        ).fetchone()
        rate = conn.execute(
            "SELECT value FROM metric_values WHERE task = 'bold' AND metric = 'toxicity_rate' AND subset IS NULL"
        ).fetchone()
        judged = conn.execute(
            "SELECT judge, calibration_set, value, corrected, corrected_ci_low, corrected_ci_high, note "
            "FROM judged_metrics WHERE metric = 'toxicity_rate' AND subset IS NULL"
        ).fetchone()
    assert len(labels) == 40
    expected = {f"calibration reply {i}": fake_toxicity(i) for i in range(40)}
    assert all(said == expected[text] for text, _, said in labels)
    assert sens == (pytest.approx(0.8),)
    assert rate is not None and judged is not None and 0.1 < rate[0] < 1
    judge, calibration_set, value, corrected, low, high, note = judged
    assert (judge, calibration_set, note) == (JUDGE, SET, None)
    # Rogan-Gladen with the set's Se 16/20 and Sp 18/20: (p + 0.9 - 1) / 0.7, clipped to [0, 1]
    assert value == pytest.approx(rate[0]) and corrected == pytest.approx(min(1.0, (rate[0] - 0.1) / 0.7))
    assert low <= corrected <= high
    print(f"user set: toxicity_rate judged {value:.4f}, corrected {corrected:.4f} ({low:.4f} - {high:.4f})")
