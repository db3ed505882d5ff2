"""bench/run_costs.py reads a make run's log into the reference seconds the time budget plans with."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_costs", ROOT / "bench" / "run_costs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOG = """\
[themis] smollm2-135m-instruct: dtype bfloat16 (auto on CPU: avx512_bf16)
[themis] judge smollm2-135m-instruct on calibration set regard: ok in 22.3 s (engine: load 9.8 s), Cohen's kappa -0.136
[themis] smollm2-135m-instruct|bbq: ok in 6.7 s (engine: load 0.0 s, inference 4.67 s)
[themis] smollm2-135m-instruct|bold: FAILED in 3.0 s
[themis] smollm2-135m-instruct|crows_pairs: ok in 22.6 s (engine: load 1.5 s, inference 20.64 s)
[themis] reports: ok in 4.9 s
"""


def test_a_logs_lines_become_inference_and_the_rest_without_the_engines_start() -> None:
    tasks, calibrations, reports, model = _script().parse(LOG)
    assert model == "smollm2-135m-instruct"
    assert tasks == {
        "bbq": {"inference_s": 4.67, "other_s": 2.03},
        "crows_pairs": {"inference_s": 20.64, "other_s": 0.46},  # 22.6 - 1.5 - 20.64; a failed task is left out
    }
    assert calibrations == {"regard": 12.5} and reports == 4.9
