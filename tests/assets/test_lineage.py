"""Model lineage: ``parent`` is validated with the registry, and new checkpoints get the previous step as parent."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster.errors import ConfigError
from themis_dagster.registry.models import ModelSpec, PackagedSource, lineage, load_registry, parse_models
from themis_dagster.sensors.checkpoints import with_parents


def _write(path: Path, entries: list[str]) -> Path:
    path.write_text("models:\n" + "".join(f"  - {{{entry}, source: {{kind: packaged}}}}\n" for entry in entries))
    return path


def test_parents_resolve_across_both_files(tmp_path: Path) -> None:
    declared = _write(tmp_path / "models.yaml", ["id: base", "id: base-lora, parent: base"])
    discovered = _write(tmp_path / "discovered.yaml", ["id: ckpt-100, parent: base", "id: ckpt-200, parent: ckpt-100"])
    models = load_registry(declared, discovered)
    assert lineage(models, "ckpt-200") == ["ckpt-200", "ckpt-100", "base"]
    assert models["base"].parent is None


def test_unregistered_parent_is_named(tmp_path: Path) -> None:
    declared = _write(tmp_path / "models.yaml", ["id: base", "id: child, parent: ghost"])
    with pytest.raises(ConfigError, match=r"child\.parent: unknown model 'ghost'"):
        load_registry(declared)


def test_cycle_of_parents_is_named(tmp_path: Path) -> None:
    declared = _write(tmp_path / "models.yaml", ["id: a, parent: c", "id: b, parent: a", "id: c, parent: b", "id: d"])
    with pytest.raises(ConfigError, match=r"parent: cycle of parents a -> c -> b -> a"):
        load_registry(declared)


def test_own_parent_and_bad_ids_fail_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"models\.0: .*parent: model 'a' cannot be its own parent"):
        parse_models({"models": [{"id": "a", "parent": "a", "source": {"kind": "packaged"}}]})
    with pytest.raises(ConfigError, match=r"models\.0\.parent: .*invalid model id"):
        parse_models({"models": [{"id": "a", "parent": "A|b", "source": {"kind": "packaged"}}]})


def _spec(model_id: str, parent: str | None = None) -> ModelSpec:
    return ModelSpec(id=model_id, source=PackagedSource(), parent=parent)


def test_new_checkpoints_get_the_previous_step_as_parent() -> None:
    registered = ["run-a-step-100", "run-a-step-300", "run-b-step-50", "other"]
    new = [_spec("run-a-step-400"), _spec("run-a-step-200"), _spec("run-a-step-50"), _spec("run-b-step-60"),
           _spec("lonely"), _spec("run-a-step-500", parent="other")]  # fmt: skip
    parents = {spec.id: spec.parent for spec in with_parents(new, registered)}
    assert parents == {
        "run-a-step-400": "run-a-step-300",
        "run-a-step-200": "run-a-step-100",
        "run-a-step-50": None,  # the first step of its family
        "run-b-step-60": "run-b-step-50",
        "lonely": None,
        "run-a-step-500": "other",  # a declared parent is kept
    }


def test_sensor_registers_checkpoints_with_their_parents(tmp_path: Path) -> None:
    """Two ticks: step 100, then step 200, whose parent (in the discovered file and on its runs) is step 100."""
    import time

    from dagster import DagsterInstance

    from tests.sensors.test_checkpoint_sensor import _run_sensor, _setup, make_checkpoint
    from themis_dagster.sensors import CheckpointWatchConfig

    themis, root = _setup(tmp_path)
    watch = CheckpointWatchConfig(checkpoints_dir=str(root), settle_seconds=60, tasks=["crows_pairs"])
    old = time.time() - 600
    make_checkpoint(root, "run-step-100", mtime=old)
    with DagsterInstance.ephemeral() as instance:
        first = _run_sensor(instance, themis, watch, None)
        make_checkpoint(root, "run-step-200", seed=1, mtime=old)
        second = _run_sensor(instance, themis, watch, first.cursor)
    models = themis.models()
    assert (models["run-step-100"].parent, models["run-step-200"].parent) == (None, "run-step-100")
    assert "themis/parent" not in first.run_requests[0].tags
    assert [r.tags["themis/parent"] for r in second.run_requests] == ["run-step-100"]
