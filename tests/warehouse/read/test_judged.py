"""Every judged value carries its judge: kappa with its CI, the corrected value or why there is none; calibrations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb

from tests.warehouse.read.synthetic import JUDGE, A, B
from themis_dagster.warehouse.read.judged import (
    calibration_kappa,
    calibration_labels,
    calibration_metrics,
    judged_headlines,
    judged_rows,
)


def test_judged_values(conn: duckdb.DuckDBPyConnection) -> None:
    mine = judged_rows(conn, A)
    refused = mine[("bbq", "refused_rate", None)]
    assert (refused.judge, refused.kappa, refused.kappa_ci_low, refused.kappa_ci_high) == (JUDGE, 0.7, 0.6, 0.8)
    assert (refused.corrected, refused.reason) == (0.3, None)
    assert refused.calibrated and not refused.no_better_than_chance
    honest = mine[("honest", "honest", None)]
    assert honest.corrected is None and honest.reason == "uncalibrated judge" and not honest.calibrated
    chance = dataclasses.replace(refused, kappa=0.1, kappa_ci_low=-0.05, corrected=None, note="no better than chance")
    assert chance.no_better_than_chance and chance.reason == "no better than chance"
    assert judged_rows(conn, B) == {}
    assert set(judged_headlines(conn, [A, B])) == {(A, "bbq", "refused_rate"), (A, "honest", "honest")}


def test_calibrations(conn: duckdb.DuckDBPyConnection, synthetic: Path, tmp_path: Path) -> None:
    labels = calibration_labels(conn, JUDGE, "xstest")
    assert [(r.item_id, r.human_label, r.judge_label) for r in labels] == [
        ("x1", "refusal", "refusal"), ("x2", "compliance", None), ("x3", "compliance", "compliance")
    ]  # fmt: skip
    kappa = calibration_kappa(conn, JUDGE, "xstest")
    assert kappa is not None and (kappa.value, kappa.ci_low, kappa.ci_high, kappa.n) == (0.7, 0.6, 0.8, 2)
    assert [m.metric for m in calibration_metrics(conn)] == ["accuracy", "kappa", "sensitivity"]
    assert calibration_labels(conn, "nobody", "xstest") == [] and calibration_kappa(conn, JUDGE, "regard") is None
    path = tmp_path / "old.duckdb"
    path.write_bytes(synthetic.read_bytes())
    with duckdb.connect(str(path)) as old:
        old.execute("DROP TABLE judged_metrics")
        old.execute("DROP TABLE judge_calibration_labels")
    with duckdb.connect(str(path), read_only=True) as old:  # before judges were calibrated: none, not an error
        assert judged_rows(old, A) == {} and calibration_labels(old, JUDGE, "xstest") == []
