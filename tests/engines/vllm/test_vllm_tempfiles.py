"""vLLM's file store (``<tmp>/vllm_dist_<hex>``) is removed also when ``themis`` skips the engine teardown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import requires_mirror, write_overrides
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.settings import PROJECT_ROOT, Settings

# A process that starts torch.distributed the way vLLM does, notes the file, then ends as told.
STORE_USER = """
import os, sys
import torch.distributed as dist
from themis_dagster.engines.vllm.tempfiles import remove_dist_stores, track_dist_store

path, ending = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo", init_method="file://" + path, rank=0, world_size=1)
assert str(track_dist_store()) == path and os.path.exists(path)
if ending == "quick exit after removing":
    remove_dist_stores()
if ending != "normal exit":
    os._exit(0)
"""


def _end(tmp_path: Path, ending: str) -> Path:
    path = tmp_path / "vllm_dist_0123abcd"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    subprocess.run([sys.executable, "-c", STORE_USER, str(path), ending], env=env, check=True, timeout=120)
    return path


def test_a_quick_exit_alone_leaves_the_file(tmp_path: Path) -> None:
    """What every ``themis run`` did: the file outlives the process."""
    assert _end(tmp_path, "quick exit").exists()


def test_the_quick_exit_removes_the_noted_file(tmp_path: Path) -> None:
    assert not _end(tmp_path, "quick exit after removing").exists()


def test_a_normal_exit_removes_it(tmp_path: Path) -> None:
    assert not _end(tmp_path, "normal exit").exists()


def test_nothing_is_noted_without_a_process_group() -> None:
    from themis_dagster.engines.vllm.tempfiles import track_dist_store

    assert track_dist_store() is None


@pytest.mark.engine
@requires_mirror
def test_themis_run_on_the_real_engine_leaves_no_vllm_dist_file(tmp_path: Path) -> None:
    """The ``themis`` command itself (quick exit included) on the default model, one tiny task."""
    settings = Settings.from_env()
    temp = tmp_path / "tmp"  # vLLM's file goes to tempfile.gettempdir(): this run's own folder
    temp.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT_ROOT),
        "TMPDIR": str(temp),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "THEMIS_ENGINE": "vllm",
        "THEMIS_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "THEMIS_MODELS_DIR": str(settings.models_dir),
        "THEMIS_CACHE_DIR": str(settings.cache_dir),
        "THEMIS_TASK_OVERRIDES": str(write_overrides(tmp_path / "o.yaml", {"crows_pairs": {"limit": 8}})),
    }
    command = "from themis_dagster.cli import console_main; console_main()"
    argv = [sys.executable, "-c", command, "run", "--model", DEFAULT_MODEL_ID, "--task", "crows_pairs"]
    argv.append("--skip-reports")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "crows_pairs: ok" in done.stdout
    assert sorted(path.name for path in temp.glob("vllm_dist_*")) == []
