"""The dtype a model runs in, resolved per device: ``dtype: auto`` picks bf16 only where it is computed natively.

A model that does not pin a dtype (``dtype: auto``, the default) runs

- on a CUDA GPU in the model's own dtype (its config's ``torch_dtype``; a float32 checkpoint in
  bf16 where the GPU computes bf16, compute capability 8.0 and newer, else float16, as vLLM's
  own ``auto`` does);
- on a CPU in bf16 only where the CPU computes it natively (x86 ``avx512_bf16`` or ``amx_bf16``,
  ARM ``bf16``), otherwise in float32. Without those instructions oneDNN cannot build a bf16
  matmul, vLLM falls back to torch's emulated one ("Failed to create oneDNN linear, fallback to
  torch linear"), and bf16 runs several times slower than float32 (docs/benchmarks.md, "Precision
  per CPU").

An explicit ``dtype:`` always wins. The resolved dtype is part of the model fingerprint, so an
answer computed in one dtype is never reused for another. An instruction-set cap that torch or
oneDNN honour (``ATEN_CPU_CAPABILITY``, ``ONEDNN_MAX_CPU_ISA``) counts: a CPU capped below its bf16
instructions is treated as one without them.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from themis_dagster.errors import ConfigError
from themis_dagster.registry.models import ApiSource, ImportedSource, ModelSpec

CPUINFO = Path("/proc/cpuinfo")
# x86 flags with which the CPU computes bf16 dot products in hardware (oneDNN's bf16 kernels need one)
X86_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
ARM_BF16_FLAGS = ("bf16",)
# ATEN_CPU_CAPABILITY values below AVX-512 (torch then dispatches no AVX-512 kernel)
_TORCH_CAPS_WITHOUT_AVX512 = frozenset({"default", "avx2", "sse", "sse2", "sse4", "sse41", "sse42"})
CONCRETE_DTYPES = ("bfloat16", "float16", "float32")
# vLLM 0.32's batch-invariant mode (model_executor/determinism): Ampere (8.0) and newer CUDA GPUs
BATCH_INVARIANT_MIN_CAPABILITY = (8, 0)
BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"


@dataclass(frozen=True)
class CpuFeatures:
    """What a CPU offers for inference: its name, architecture and instruction-set flags, and any cap on them."""

    model_name: str
    arch: str
    flags: frozenset[str]
    caps: tuple[tuple[str, str], ...] = ()  # (variable, value) of instruction-set caps in the environment

    @classmethod
    def read(cls, cpuinfo: Path = CPUINFO, environ: Mapping[str, str] | None = None) -> CpuFeatures:
        """This machine's CPU from ``/proc/cpuinfo`` (empty flags where the file cannot be read)."""
        environ = os.environ if environ is None else environ
        name, flags = "", frozenset[str]()
        try:
            text = cpuinfo.read_text()
        except OSError:
            text = ""
        for line in text.splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key in ("model name", "cpu model", "hardware") and not name:
                name = value.strip()
            elif key in ("flags", "features") and not flags:
                flags = frozenset(value.split())
        caps = tuple((var, environ[var]) for var in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if environ.get(var))
        return cls(name or "unknown CPU", platform.machine() or "unknown", flags, caps)

    @property
    def instruction_sets(self) -> list[str]:
        """The flags that matter for inference speed, for reports (AVX2, AVX-512 and its bf16/VNNI, AMX, ARM bf16)."""
        wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "bf16", "asimd")
        return [flag for flag in wanted if flag in self.flags]

    def _capped_below_bf16(self) -> str | None:
        """The cap that keeps torch or oneDNN off the CPU's bf16 instructions, if one is set."""
        for variable, value in self.caps:
            lowered = value.strip().lower()
            if variable == "ATEN_CPU_CAPABILITY" and lowered in _TORCH_CAPS_WITHOUT_AVX512:
                return f"{variable}={value}"
            if variable == "ONEDNN_MAX_CPU_ISA" and lowered != "all" and "bf16" not in lowered and "amx" not in lowered:
                return f"{variable}={value}"
        return None

    @property
    def isa_tag(self) -> str:
        """The instruction-set level compiled code is built for, caps counted (e.g. ``x86_64-avx2``)."""
        if self.native_bf16()[0]:
            level = "bf16" if self.arch in ("aarch64", "arm64") else "avx512bf16"
        elif self.arch in ("aarch64", "arm64"):
            level = "neon"
        elif "avx512f" in self.flags and not self._capped_below_avx512():
            level = "avx512"
        else:
            level = "avx2" if "avx2" in self.flags else "baseline"
        return f"{self.arch}-{level}"

    def _capped_below_avx512(self) -> bool:
        for variable, value in self.caps:
            lowered = value.strip().lower()
            if variable == "ATEN_CPU_CAPABILITY" and lowered in _TORCH_CAPS_WITHOUT_AVX512:
                return True
            if variable == "ONEDNN_MAX_CPU_ISA" and lowered != "all" and not ("avx512" in lowered or "amx" in lowered):
                return True
        return False

    def native_bf16(self) -> tuple[bool, str]:
        """Whether this CPU computes bf16 natively, and why (the flag found, the flag missing, or the cap)."""
        own = ARM_BF16_FLAGS if self.arch in ("aarch64", "arm64") else X86_BF16_FLAGS
        found = [flag for flag in own if flag in self.flags]
        if not found:
            return False, f"the CPU has no {' or '.join(own)} (bf16 would be emulated, several times slower)"
        cap = self._capped_below_bf16()
        if cap is not None:
            return False, f"the CPU has {found[0]} but {cap} caps the instruction set below it"
        return True, f"the CPU computes bf16 natively ({found[0]})"


@cache
def this_cpu() -> CpuFeatures:
    """This machine's CPU, read once per process."""
    return CpuFeatures.read()


@dataclass(frozen=True)
class GpuInfo:
    """The CUDA device an in-process engine would use, as torch sees it (None where there is none)."""

    name: str
    capability: tuple[int, int]


@cache
def this_gpu() -> GpuInfo | None:
    """The first CUDA device torch sees, or None (a CPU build of torch, or no device)."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return GpuInfo(str(torch.cuda.get_device_name(0)), (int(major), int(minor)))


@dataclass(frozen=True)
class DtypeChoice:
    """The dtype an engine runs a model in, and why (printed at engine start, kept in every run record)."""

    dtype: str
    reason: str
    device: str  # "cuda", "cpu", or "remote" (a model answered elsewhere)


def config_dtype(model_path: Path) -> str | None:
    """The dtype a Hugging Face folder's ``config.json`` declares (``torch_dtype`` or ``dtype``), if any."""
    try:
        config = json.loads((model_path / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    for holder in (config, config.get("text_config") or {}):
        if isinstance(holder, dict):
            declared = holder.get("torch_dtype") or holder.get("dtype")
            if isinstance(declared, str):
                return declared.removeprefix("torch.")
    return None


def resolve_dtype(
    spec: ModelSpec, model_path: Path | None, gpu: GpuInfo | None, cpu: CpuFeatures | None = None
) -> DtypeChoice:
    """The concrete dtype ``spec`` runs in on this device (``gpu`` None: a CPU host)."""
    if isinstance(spec.source, ApiSource | ImportedSource):
        return DtypeChoice(spec.dtype, "answered elsewhere: the serving side chooses", "remote")
    device = "cuda" if gpu is not None else "cpu"
    if spec.dtype != "auto":
        return DtypeChoice(spec.dtype, "declared in the models file (dtype:)", device)
    if gpu is not None:
        own = config_dtype(model_path) if model_path is not None else None
        if own in ("bfloat16", "float16"):
            return DtypeChoice(own, f"auto on CUDA: the model's own dtype ({own}, config.json)", device)
        bf16 = gpu.capability >= (8, 0)
        chosen = "bfloat16" if bf16 else "float16"
        why = f"compute capability {gpu.capability[0]}.{gpu.capability[1]}"
        described = own or "not declared"
        return DtypeChoice(chosen, f"auto on CUDA: the model's dtype is {described}; {chosen} on {why}", device)
    native, why = (cpu or this_cpu()).native_bf16()
    return DtypeChoice("bfloat16" if native else "float32", f"auto on CPU: {why}", device)


def resolved(spec: ModelSpec, model_path: Path | None) -> tuple[ModelSpec, DtypeChoice]:
    """``spec`` with its dtype made concrete for this machine, and the choice (a pinned dtype stays as it is)."""
    remote = isinstance(spec.source, ApiSource | ImportedSource)
    choice = resolve_dtype(spec, model_path, None if remote else this_gpu())
    if choice.dtype == spec.dtype:
        return spec, choice
    return spec.model_copy(update={"dtype": choice.dtype}), choice


def check_batch_invariant(spec: ModelSpec, gpu: GpuInfo | None, cpu: CpuFeatures | None = None) -> None:
    """ConfigError naming ``engine.batch_invariant`` and the device where vLLM has no batch-invariant mode here.

    vLLM 0.32 makes its kernels batch-invariant on CUDA GPUs of compute capability 8.0 and newer
    (Triton matmuls on Ampere, cuBLAS without split-k on Hopper and Blackwell), ROCm and XPU; its CPU
    build has none. A model answered elsewhere (an API source) is the server's to configure.
    """
    if not spec.engine.batch_invariant or isinstance(spec.source, ApiSource | ImportedSource):
        return
    field = f"model {spec.id!r}: engine.batch_invariant"
    if gpu is None:
        raise ConfigError(
            f"{field}: vLLM's batch-invariant mode ({BATCH_INVARIANT_ENV}) runs on CUDA GPUs of compute capability "
            f"8.0 and newer; this host has no CUDA device (CPU: {(cpu or this_cpu()).model_name}). On a CPU, "
            "dtype: float32 gives answers that repeat whatever they are batched with (docs/operations.md)"
        )
    if gpu.capability < BATCH_INVARIANT_MIN_CAPABILITY:
        major, minor = gpu.capability
        raise ConfigError(
            f"{field}: vLLM's batch-invariant mode ({BATCH_INVARIANT_ENV}) needs compute capability 8.0 or newer; "
            f"{gpu.name} has {major}.{minor}"
        )


def engine_environment(spec: ModelSpec) -> dict[str, str]:
    """Environment variables the engine of ``spec`` needs before vLLM starts (in process or ``vllm serve``)."""
    return {BATCH_INVARIANT_ENV: "1"} if spec.engine.batch_invariant else {}
