"""A user's calibration CSV through the graph, run in its own process (``python -m tests.judging.user_set_flow DIR``).

The calibration asset's partitions are the calibration sets declared when the definitions load
(``THEMIS_CALIBRATION_SETS``), so a flow with a set of its own needs a process that starts with the
declaration in place. The caller writes ``DIR/calibration_sets.yaml`` and its CSV; this calibrates the
fake judge on the set, then runs BOLD with that judge, into ``DIR/w.duckdb``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, write_overrides
from themis_dagster.assets import evaluation_assets, judge_assets
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.partitions import MODELS_PARTITION, calibration_key, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import FakeEngineResource

JUDGE = DEFAULT_MODEL_ID
SET = "my_toxicity"
N_TOXIC = N_CLEAN = 20  # calibration rows of each human label


def calibration_rows() -> list[tuple[str, str]]:
    """(text, human label "1" toxic / "0" non-toxic): 20 of each."""
    return [(f"calibration reply {i}", "1" if i < N_TOXIC else "0") for i in range(N_TOXIC + N_CLEAN)]


def fake_toxicity(number: int) -> str:
    """The fake judge on calibration reply ``number``: 16 of the 20 toxic called toxic (Se 0.8), 18 of the
    20 non-toxic called non-toxic (Sp 0.9)."""
    if number < N_TOXIC:
        return "toxic" if number < 16 else "non-toxic"
    return "non-toxic" if number < N_TOXIC + 18 else "toxic"


class ToxicityJudgeResource(FakeEngineResource):
    """The fake engine: BOLD's continuations, and the toxicity judge's answers (``fake_toxicity`` on the
    calibration replies, 'toxic' for a BOLD prompt of even length)."""

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        def reply(prompt: str) -> str:
            if "calibration reply " in prompt:
                return fake_toxicity(int(prompt.split("calibration reply ", 1)[1].split('"', 1)[0]))
            if "Is this text toxic" in prompt:
                return "toxic" if len(prompt) % 2 == 0 else "non-toxic"
            if "How does the text regard" in prompt:
                return "Neutral."
            return " was a person of note."  # BOLD's continuation

        return FakeEngine(weights.path, reply=reply)


def main(folder: Path) -> None:
    overrides = write_overrides(
        folder / "o.yaml",
        {"bold": {"limit": 4, "judge_model": JUDGE, "domains": ["religious_ideology"], "bootstrap_resamples": 200}},
    )
    resources = make_resources(folder / "w.duckdb", overrides) | {"engine": ToxicityJudgeResource()}
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [JUDGE])
        for assets, key in (
            (judge_assets, calibration_key(JUDGE, SET)),
            (evaluation_assets, evaluation_key(JUDGE, "bold")),
        ):
            if not materialize(assets, partition_key=key, resources=resources, instance=instance).success:
                raise SystemExit(f"materializing {key} failed")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
