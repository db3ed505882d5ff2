"""The ``vllm serve`` command line of a model, what makes two of them interchangeable, and running it.

The arguments are those of the in-process ``VLLMEngine`` (``engine_kwargs``: dtype, seed, max
model length, memory fraction or KV cache size). The command runs ``python -m
themis_dagster.engines.vllm.server serve ...``, which is ``run_vllm_serve``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys

from themis_dagster.engines.vllm.startup import engine_kwargs, library_versions
from themis_dagster.registry.models import ModelSpec

HOST = "127.0.0.1"
ENTRY_POINT = "themis_dagster.engines.vllm.server"  # python -m: serve | supervise | stop


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def cpu_thread_binding() -> str:
    """The VLLMEngine default: every core this process may use (vLLM's own default keeps one idle)."""
    if os.environ.get("VLLM_CPU_OMP_THREADS_BIND"):
        return os.environ["VLLM_CPU_OMP_THREADS_BIND"]
    cores = sorted(os.sched_getaffinity(0))
    return f"{cores[0]}-{cores[-1]}" if len(cores) > 1 else str(cores[0])


def served_model_name(spec: ModelSpec) -> str:
    """The name requests use: the model id, or the LoRA adapter's name when one is served."""
    return spec.lora.name if spec.lora is not None else spec.id


def serve_argv(spec: ModelSpec, model_path: str, port: int, on_gpu: bool) -> list[str]:
    """``vllm serve`` with the same engine arguments as the in-process ``VLLMEngine``."""
    kwargs = engine_kwargs(spec, model_path, on_gpu)
    argv = [sys.executable, "-m", ENTRY_POINT, "serve", str(kwargs.pop("model"))]
    for key, value in kwargs.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(f"--{flag}" if value else f"--no-{flag}")
        elif isinstance(value, list | tuple):
            argv += [f"--{flag}", *(str(item) for item in value)]  # argparse nargs="+"
        else:
            argv += [f"--{flag}", str(value)]
    argv += ["--served-model-name", spec.id]
    if spec.lora is not None:
        argv += ["--lora-modules", f"{spec.lora.name}={spec.lora.path.expanduser().resolve()}"]
    if spec.chat_template not in (None, "auto"):
        argv += ["--chat-template", str(spec.chat_template)]
    if spec.reasoning is not None:  # the server splits replies; the engine reads its reasoning field
        argv += ["--reasoning-parser", spec.reasoning.parser]
    argv += [
        "--host",
        HOST,
        "--port",
        str(port),
        "--enable-tokenizer-info-endpoint",  # BOS/EOS for empty-context loglikelihoods
        "--enable-server-load-tracking",  # GET /load: the watchdog's "requests in flight"
        "--disable-uvicorn-access-log",
    ]
    return argv


def serve_flags(argv: list[str]) -> list[str]:
    """The model path and flags of a serve command line, without the interpreter and the port."""
    flags = argv[4:]
    return [arg for i, arg in enumerate(flags) if arg != "--port" and (i == 0 or flags[i - 1] != "--port")]


def server_fingerprint(argv: list[str], weights_sha256: str, env: dict[str, str]) -> str:
    """What makes a running server interchangeable with a fresh one (the port excluded)."""
    versions = library_versions()
    payload = {"argv": serve_flags(argv), "weights": weights_sha256, "env": env, "vllm": versions.get("vllm-cpu", "")}
    payload["vllm"] = payload["vllm"] or versions.get("vllm", "")
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def run_vllm_serve(args: list[str]) -> int:
    """``vllm serve ARGS``; under vllm-cpu its CLI first asks for the version of a "vllm" distribution.

    vllm-cpu installs as ``vllm-cpu``, so that lookup fails (platform-facts); answering it
    with ``<vllm-cpu version>+cpu`` -- the form vLLM's own CPU detection expects -- lets it run.
    """
    import importlib.metadata as metadata

    try:
        metadata.version("vllm")
    except metadata.PackageNotFoundError:
        original = metadata.version
        answer = original("vllm-cpu") + "+cpu"

        def version(distribution_name: str) -> str:
            return answer if distribution_name == "vllm" else original(distribution_name)

        metadata.version = version
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", "serve", *args]
    vllm_main()  # type: ignore[no-untyped-call]
    return 0
