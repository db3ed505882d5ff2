"""Run this Python as on an AVX2-only CPU (``THEMIS_CPU_ISA=avx2``), to measure that path on an AVX-512 machine.

Put this folder first on ``PYTHONPATH`` (``make test CPU_ISA=avx2``, ``make run CPU_ISA=avx2``) and every
Python process of the run, the ones vLLM, Dagster and the tests start included, caps:

- torch at AVX2 (``ATEN_CPU_CAPABILITY=avx2``) and oneDNN at AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2``): bf16
  matmuls are emulated there, and vLLM logs "Failed to create oneDNN linear, fallback to torch linear";
- vLLM's own choice of kernels: it asks ``torch.cpu._is_avx512_supported()`` and its siblings, which read
  the hardware, not the caps; they answer False here, so vLLM loads its ``_C_AVX2`` kernels and the
  vector attention an AVX2 machine gets.

Variables already set are left alone. Without ``THEMIS_CPU_ISA=avx2`` this module does nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

_HARDWARE_CHECKS = (
    "_is_avx512_supported",
    "_is_avx512_vnni_supported",
    "_is_avx512_bf16_supported",
    "_is_amx_tile_supported",
    "_is_amx_fp16_supported",
)


def _no() -> bool:
    return False


def _cap(module: ModuleType) -> None:
    for name in _HARDWARE_CHECKS:
        if hasattr(module, name):
            setattr(module, name, _no)


class _CapTorchCpu(importlib.abc.MetaPathFinder):
    """Patches ``torch.cpu`` as it is imported, so a process that never imports torch pays nothing."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch.cpu":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            _cap(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("THEMIS_CPU_ISA", "").lower() == "avx2":
    import importlib.util

    os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    if "torch.cpu" in sys.modules:
        _cap(sys.modules["torch.cpu"])
    else:
        sys.meta_path.insert(0, _CapTorchCpu())
