"""A variant's requests go through the one answering path, cached under a key that holds its perturbation.

The stage functions of the chain (``evaluation/``) on a task and its variants over the fake engine
and one request cache: the original, ``identity`` (the same texts), ``gender_swap`` and a user's
word-pair CSV whose words never occur. The perturbation's name, direction and its list's sha256
are in every variant request's key: the identity's unchanged texts are answered by the engine
again, a run again reuses each variant's own answers, and the same CSV name over another list is
another key; the run record names the perturbation.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml

from tests.conftest import MIRROR, requires_mirror
from themis_dagster.datasets import resolve_file
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.evaluation.answering import Answerer
from themis_dagster.evaluation.items import load_items
from themis_dagster.evaluation.partition import EvaluationPartition
from themis_dagster.evaluation.prompts import render_partition
from themis_dagster.evaluation.request_keys import request_fingerprints
from themis_dagster.evaluation.responses import answer_prompts, run_config
from themis_dagster.evaluation.variants import variant_perturbation
from themis_dagster.perturbations.frames import keyed_fingerprint
from themis_dagster.registry.models import ModelSpec
from themis_dagster.registry.weights import ResolvedWeights
from themis_dagster.resources import WarehouseResource
from themis_dagster.tasks.loader import LoadedTask, load_overrides, load_task
from themis_dagster.tasks.spec import TaskInputs

pytestmark = requires_mirror

MODEL_FP = "model-fingerprint"
ITEMS = 6  # winogender sentences: two loglikelihood requests each


def _overrides(folder: Path, pairs: str) -> Path:
    (folder / "pairs.csv").write_text(pairs)
    path = folder / "overrides.yaml"
    path.write_text(yaml.safe_dump({"winogender": {"limit": ITEMS, "perturbations": [
        "identity", "gender_swap", {"name": "absent", "kind": "word_pairs", "path": "pairs.csv"},
    ]}}))  # fmt: skip
    return path


def _task(name: str, overrides: Path, cache: Path) -> LoadedTask:
    inputs = TaskInputs(datasets_dir=MIRROR, cache_dir=cache, allow_downloads=False)
    return load_task(name, load_overrides(overrides).get(name)).with_inputs(inputs)


class Run:
    """One partition through the prompts and responses stages, over one engine and one request cache."""

    def __init__(self, folder: Path) -> None:
        self.engine = FakeEngine()
        warehouse = WarehouseResource(database=str(folder / "w.duckdb"))
        self.database = folder / "w.duckdb"
        self.answerer = Answerer("m", lambda: self.engine, warehouse, model_fingerprint=MODEL_FP, chunk_size=64)

    def __call__(self, task: LoadedTask) -> tuple[pl.DataFrame, int, int]:
        """(the partition's prompts, requests sent to the engine, answers reused from the cache)."""
        key = EvaluationPartition("m", task.name)
        files = {name: resolve_file(task.spec.dataset, name, datasets_dir=MIRROR, cache_dir=task.inputs.cache_dir,
                                    allow_download=False) for name in task.spec.files}  # fmt: skip
        prompts = render_partition(task, key, load_items(task, key, files)).frame
        answered = answer_prompts(task, key, prompts, self.answerer, read_items=list)
        return prompts, answered.stats.sent, answered.stats.reused

    def cached(self) -> set[str]:
        if not self.database.exists():
            return set()
        with duckdb.connect(str(self.database), read_only=True) as conn:
            return {str(row[0]) for row in conn.execute("SELECT fingerprint FROM request_cache").fetchall()}


def _texts(prompts: pl.DataFrame) -> list[tuple[str, str, str]]:
    return prompts.select("request_id", "context", "continuation").rows()


def test_each_variant_is_answered_under_its_own_key(tmp_path: Path) -> None:
    overrides = _overrides(tmp_path, "a,b\nzzyzx,qwxyz\n")  # words no Winogender sentence holds
    cache = tmp_path / "cache"
    run = Run(tmp_path)
    original, sent, reused = run(_task("winogender", overrides, cache))
    assert (sent, reused) == (2 * ITEMS, 0)
    keys = {"winogender": request_fingerprints(original, MODEL_FP)}
    for name in ("winogender__identity", "winogender__gender_swap", "winogender__absent"):
        variant = _task(name, overrides, cache)
        perturbation = variant_perturbation(variant)
        assert perturbation is not None
        prompts, sent, reused = run(variant)
        assert (sent, reused) == (2 * ITEMS, 0), name  # nothing shared with the original or another variant
        assert (_texts(prompts) == _texts(original)) == (name != "winogender__gender_swap"), name
        keys[name] = request_fingerprints(prompts, keyed_fingerprint(MODEL_FP, perturbation.key))
        assert set(keys[name]) <= run.cached(), name  # committed under the key that holds the perturbation
        assert run(variant)[1:] == (0, 2 * ITEMS), name  # run again: its own answers, from the cache
    assert sum(len(set(found)) for found in keys.values()) == len({key for found in keys.values() for key in found})
    assert len(run.cached()) == 4 * 2 * ITEMS
    assert len(run.engine.calls) == 4  # one engine call per partition's first run


def test_another_word_list_under_the_same_name_is_another_key(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run = Run(tmp_path)
    first = _task("winogender__absent", _overrides(tmp_path, "a,b\nzzyzx,qwxyz\n"), cache)
    before = variant_perturbation(first)
    assert run(first)[1:] == (2 * ITEMS, 0)
    second = _task("winogender__absent", _overrides(tmp_path, "a,b\nzzyzx,qwxyzz\n"), cache)
    after = variant_perturbation(second)
    assert before is not None and after is not None
    assert before.name == after.name and before.list_sha256 != after.list_sha256
    assert run(second)[1:] == (2 * ITEMS, 0)  # the same texts, another list: answered again


def test_the_run_record_names_the_perturbation(tmp_path: Path) -> None:
    overrides = _overrides(tmp_path, "a,b\nzzyzx,qwxyz\n")
    spec = ModelSpec.model_validate({"id": "m", "source": {"kind": "packaged"}})
    weights = ResolvedWeights(path="fake", revision="r", weights_sha256="s")
    variant = _task("winogender__gender_swap", overrides, tmp_path / "cache")
    perturbation = variant_perturbation(variant)
    assert perturbation is not None
    record = run_config(spec, weights, variant, None, {"engine": "fake"}, None)["perturbation"]
    assert record == {"name": "gender_swap", "to": "both", "list_sha256": perturbation.list_sha256,
                      "key": perturbation.key}  # fmt: skip
    assert "perturbation" not in run_config(spec, weights, _task("winogender", overrides, tmp_path), None, {}, None)


@pytest.mark.parametrize("name", ["winogender", "winogender__identity"])
def test_a_partition_without_a_cache_is_never_keyed(tmp_path: Path, name: str) -> None:
    """The request cache off (no model fingerprint): a variant's answers are not cached either."""
    run = Run(tmp_path)
    run.answerer = Answerer("m", lambda: run.engine, run.answerer.warehouse, model_fingerprint=None, chunk_size=64)
    assert run(_task(name, _overrides(tmp_path, "a,b\nzzyzx,qwxyz\n"), tmp_path / "cache"))[1:] == (2 * ITEMS, 0)
    assert run.cached() == set()
