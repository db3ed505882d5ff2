"""A small warehouse of the families whose results the explorer draws beyond a value: persona polls, OpinionQA,
SHADES, the counterfactual chat and a perturbed variant, built by the project's own assets with the fake engine.

One model (``MODEL``) on persona_poll (three states with the 2020 reference, both genders), opinions_qa
(four questions, one steered toward Democrats), shades and shades_chat (a few statement groups) and
counterfactual_chat (two requests, both axes, judged by ``JUDGE``, which has WinoBias only). The fake
engine refuses every request from a user named Julia, and the judge names the refused reply the worse
one in either order, so the gender pair of the first request is a harmful difference. WinoBias is
evaluated, then its ``gender_swap`` variant is made from its stored prompts with the perturbation's own
code (answered by the same fake engine and judged by the task's own judge) and its effects measured and
stored as ``perturbation_effects`` computes them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
from dagster import DagsterInstance, materialize

from tests.conftest import make_resources, write_overrides
from tests.explorer_warehouse import Built
from themis_dagster.assets import evaluation_assets
from themis_dagster.comparisons.perturbation_store import effects_in_warehouse, store_effects
from themis_dagster.engines.base import Engine
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.exchange import Request
from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
from themis_dagster.perturbations import Mirror, build
from themis_dagster.perturbations.frames import perturb_frame
from themis_dagster.registry.models import DEFAULT_MODEL_ID, ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import ThemisConfig
from themis_dagster.resources.engine import FakeEngineResource
from themis_dagster.settings import PROJECT_ROOT
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Item
from themis_dagster.tasks.variants import variant_name
from themis_dagster.warehouse.appends import append_rows
from themis_dagster.warehouse.frames import from_frame, to_frame

MODEL, JUDGE = "smol-views", "smol-views-judge"
REFUSAL = "I cannot help with that."
PERTURBED, PERTURBATION = "winobias", "gender_swap"
VARIANT = variant_name(PERTURBED, PERTURBATION)
TASKS: dict[str, dict[str, object]] = {
    "persona_poll": {"persona_sets": ["state", "gender"], "limit": 3},
    "opinions_qa": {"limit": 4, "steer_limit": 1, "steer_groups": ["POLPARTY=Democrat"]},
    "shades": {"limit": 6},
    "shades_chat": {"limit": 2},
    "counterfactual_chat": {"limit": 2, "judge_model": JUDGE, "generation": {"max_tokens": 16}},
    PERTURBED: {"limit": 8},
}


def reply(prompt: str) -> str:
    """The fake chat engine's replies: the counterfactual judge's answers, yes to SHADES, a refusal to Julia."""
    if "Does one reply treat its user worse" in prompt:
        first, _, second = prompt.partition("Second reply")
        return "first" if REFUSAL in first else "second" if REFUSAL in second else "neither"
    if "How does the text regard" in prompt:
        return "Negative." if REFUSAL in prompt else "Positive."
    if "Julia" in prompt:
        return REFUSAL
    return "yes" if "Please respond with" in prompt else "Here is a short answer."


class RepliesResource(FakeEngineResource):
    """The fake engine with :func:`reply` as every model's chat replies (loglikelihoods as the fake engine's)."""

    def _build(self, spec: ModelSpec, weights: ResolvedWeights) -> Engine:
        return FakeEngine(weights.path, reply=reply)


def _variant(themis: ThemisConfig, warehouse: Path, overrides: dict[str, object]) -> None:
    """The perturbed variant of ``PERTURBED``: its stored prompts rewritten, answered, judged, its effects stored."""
    original, variant = load_task(PERTURBED, overrides), load_task(VARIANT, overrides)
    assert variant.perturbation is not None
    perturbation = build(variant.perturbation, Mirror(Path(themis.datasets_dir), Path(themis.cache_dir), False), "")
    with duckdb.connect(str(warehouse)) as conn:
        where = [MODEL, PERTURBED]
        items = from_frame(
            "task_items", conn.execute("SELECT * FROM task_items WHERE model = ? AND task = ?", where).pl(), Item
        )
        stored = conn.execute("SELECT * FROM prompts WHERE model = ? AND task = ? ORDER BY request_id", where).pl()
        requests = from_frame("prompts", perturb_frame(stored, perturbation)[0], Request)
        responses = FakeEngine("fake").loglikelihood(requests)
        judged = variant.hooks.judge(items, requests, responses, variant.params)
        for table, records in (("prompts", requests), ("responses", responses), ("judgments", judged)):
            append_rows(conn, table, to_frame(table, records, model=MODEL, task=VARIANT))  # type: ignore[arg-type]
        effects = effects_in_warehouse(conn, original, MODEL, VARIANT, perturbation.name)
        store_effects(conn, MODEL, VARIANT, PERTURBED, perturbation.key, effects, run_id="fixture")


def build_families(root: Path) -> Built:
    """Build the warehouse under ``root``, its registry and the playground's Dagster home (its engine pool) too."""
    root.mkdir(parents=True, exist_ok=True)
    warehouse = root / "warehouse.duckdb"
    sizes = {task: {**params, "bootstrap_resamples": 100} for task, params in TASKS.items()}
    resources = make_resources(warehouse, write_overrides(root / "overrides.yaml", sizes))
    themis = resources["themis"]
    assert isinstance(themis, ThemisConfig)
    source = f"{{kind: local, path: {themis.weights(themis.model(DEFAULT_MODEL_ID)).path}}}"
    models_file = root / "models.yaml"
    models_file.write_text(
        "models:\n"
        f"  - {{id: {MODEL}, source: {source}, dtype: bfloat16, chat_template: auto}}\n"
        f"  - {{id: {JUDGE}, source: {source}, dtype: bfloat16, chat_template: auto}}\n"
    )
    themis = ThemisConfig(**{**themis.model_dump(), "models_file": str(models_file)})
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [MODEL, JUDGE])
        for model, task in [*((MODEL, task) for task in TASKS), (JUDGE, PERTURBED)]:
            result = materialize(
                evaluation_assets,
                partition_key=evaluation_key(model, task),
                resources={**resources, "themis": themis, "engine": RepliesResource()},
                instance=instance,
                raise_on_error=False,
            )
            assert result.success, f"{model}|{task} failed"
    _variant(themis, warehouse, sizes[PERTURBED])
    home = root / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    return Built(root, warehouse, models_file, home)
