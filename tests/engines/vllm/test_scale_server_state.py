"""The vllm-server engine's servers are per host, and that is enforced (docs/scale-out.md).

When runs of one model land on several hosts (Ray nodes, Kubernetes pods) and their
``THEMIS_SERVER_STATE_DIR`` is one shared folder, a host must never attach to, or kill, the
processes another host's state names: it fails naming the setting instead. A state left by an
earlier boot of this host is stale and is dropped without signalling anything. No vLLM here: the
checks happen before any server starts.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from themis_dagster.engines.vllm.server import (
    ServerStateHostError,
    VLLMServerManager,
    boot_id,
    host_fields,
    process_start_time,
    usable_state,
)
from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_registry
from themis_dagster.settings import Settings


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A live process whose pid the foreign state names: it must survive everything below."""
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def _write_state(folder: Path, pid: int, **host: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    state = {"model_id": DEFAULT_MODEL_ID, "status": "ready", "pid": pid, "pid_start": process_start_time(pid),
             "base_url": "http://127.0.0.1:1", "served_model": DEFAULT_MODEL_ID, "fingerprint": "x",
             **host}  # fmt: skip
    path = folder / f"{DEFAULT_MODEL_ID}.json"
    path.write_text(json.dumps(state))
    return path


def test_a_state_written_by_another_host_is_refused_naming_the_setting(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    folder = tmp_path / "shared-servers"
    state_file = _write_state(folder, bystander.pid, host="other-node", boot_id=boot_id())
    before = state_file.read_text()
    manager = VLLMServerManager(folder)
    spec = load_registry(Settings().models_file)[DEFAULT_MODEL_ID]
    refused = r"THEMIS_SERVER_STATE_DIR=.*written by host 'other-node'.*per host"
    with pytest.raises(ServerStateHostError, match=refused):
        manager.ensure(spec, str(tmp_path), "0" * 64, idle_shutdown_s=60, startup_timeout_s=5)
    with pytest.raises(ServerStateHostError, match=refused):
        manager.stop(DEFAULT_MODEL_ID)
    assert bystander.poll() is None  # nothing was signalled
    assert state_file.read_text() == before  # nor rewritten
    assert not (folder / f"{DEFAULT_MODEL_ID}.log").exists()  # and no server was started


def test_a_state_from_an_earlier_boot_of_this_host_is_stale_and_nothing_is_killed(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    folder = tmp_path / "servers"
    _write_state(folder, bystander.pid, host=host_fields()["host"], boot_id="an-earlier-boot")
    manager = VLLMServerManager(folder)
    assert manager.stop(DEFAULT_MODEL_ID) is False  # no server of this boot to stop
    assert bystander.poll() is None


def test_states_of_this_host_and_older_states_without_host_fields_are_used(tmp_path: Path) -> None:
    paths = VLLMServerManager(tmp_path).paths(DEFAULT_MODEL_ID)
    mine = {"pid": 1, **host_fields()}
    assert usable_state(mine, paths) == mine
    assert usable_state({"pid": 1}, paths) == {"pid": 1}
    assert usable_state(None, paths) is None
