"""Regression gates: the gate file is validated against the tasks, and ``gate_verdicts`` fires only on regressions."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from themis_dagster.comparisons.gates import Gate, load_gates, parse_gates
from themis_dagster.comparisons.store import store_gates
from themis_dagster.errors import ConfigError
from themis_dagster.warehouse.schema import ensure_schema


def test_shipped_gate_file_is_valid() -> None:
    gates = load_gates()
    assert ("crows_pairs", "pct_stereotype") in {(gate.task, gate.metric) for gate in gates}
    assert all(0 < gate.alpha < 1 and gate.margin >= 0 for gate in gates)


def test_defaults_apply_and_the_task_gives_the_ideal() -> None:
    (gate,) = parse_gates({"defaults": {"margin": 0.1}, "gates": [{"task": "bbq", "metric": "s_dis", "alpha": 0.01}]})
    assert gate == Gate(task="bbq", metric="s_dis", margin=0.1, alpha=0.01, ideal=0.0, higher_is_better=None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"gates": [{"task": "nope", "metric": "x"}]}, r"gates\.0\.task: unknown task 'nope'"),
        ({"gates": [{"task": "bbq", "metric": "nope"}]}, r"gates\.0\.metric: task bbq has no metric 'nope'"),
        ({"gates": [{"task": "gb_direct", "metric": "fail_rate_mark"}]}, r"gates\.0\.metric: .* is not compared"),
        ({"gates": [{"task": "bbq", "metric": "s_dis", "alpha": 2}]}, r"gates\.0\.alpha"),
        ({"gates": [{"task": "bbq", "metric": "s_dis", "typo": 1}]}, r"gates\.0\.typo"),
        ({"gates": [{"task": "bbq", "metric": "s_dis"}] * 2}, r"gates\.1: bbq\.s_dis is gated twice"),
    ],
)
def test_bad_gate_files_fail_naming_the_field(data: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_gates(data, origin="gates.yaml")


def test_gate_file_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "gates.yaml"
    path.write_text("gates:\n  - {task: crows_pairs, metric: pct_stereotypes}\n")
    monkeypatch.setenv("THEMIS_GATES_FILE", str(path))
    with pytest.raises(ConfigError, match=rf"{path}: gates\.0\.metric"):
        load_gates()


def _verdicts(rows: list[tuple[str, float, float, float]]) -> dict[str, bool]:
    """gate_verdicts for (metric, value, baseline_value, p_value) rows of one pair on crows_pairs."""
    gates = parse_gates(
        {
            "defaults": {"margin": 0.02, "alpha": 0.05},
            "gates": [
                {"task": "crows_pairs", "metric": "pct_stereotype"},  # ideal 0.5
                {"task": "crows_pairs", "metric": "likelihood_diff"},  # ideal 0.0
            ],
        }
    )
    with duckdb.connect() as conn:
        ensure_schema(conn)
        store_gates(conn, gates)
        for metric, value, baseline_value, p in rows:
            conn.execute(
                "INSERT INTO comparison_results VALUES ('child', 'parent', 'crows_pairs', NULL, ?, ?, ?, ?, 0, 0, ?, "
                "100, 'mcnemar_exact', NULL, 'parent', now(), 'r')",
                [metric, value, baseline_value, value - baseline_value, p],
            )
        return dict(conn.execute("SELECT metric, regressed FROM gate_verdicts").fetchall())


def test_moving_away_from_the_ideal_beyond_margin_and_noise_regresses() -> None:
    # pct_stereotype 0.55 -> 0.60 moves 0.05 away from 0.5; likelihood_diff 3.0 -> 3.01 only 0.01 (within margin)
    assert _verdicts([("pct_stereotype", 0.60, 0.55, 0.001), ("likelihood_diff", 3.01, 3.0, 0.001)]) == {
        "pct_stereotype": True,
        "likelihood_diff": False,
    }
    # the same distance but towards the ideal (0.60 -> 0.55; 0.45 -> 0.40 is away again)
    assert _verdicts([("pct_stereotype", 0.55, 0.60, 0.001)]) == {"pct_stereotype": False}
    assert _verdicts([("pct_stereotype", 0.40, 0.45, 0.001)]) == {"pct_stereotype": True}
    # crossing the ideal: 0.45 -> 0.54 is 0.04 from 0.5, closer than 0.05: not a regression
    assert _verdicts([("pct_stereotype", 0.54, 0.45, 0.001)]) == {"pct_stereotype": False}
    # not significant after Holm (two tests: 2 * 0.03 > 0.05)
    assert _verdicts([("pct_stereotype", 0.70, 0.55, 0.03), ("likelihood_diff", 3.5, 3.0, 0.03)]) == {
        "pct_stereotype": False,
        "likelihood_diff": False,
    }


def test_nothing_changed_never_regresses() -> None:
    assert _verdicts([("pct_stereotype", 0.6, 0.6, 1.0), ("likelihood_diff", 3.0, 3.0, 1.0)]) == {
        "pct_stereotype": False,
        "likelihood_diff": False,
    }
