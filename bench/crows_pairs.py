"""Benchmark: the full `crows_pairs` partition vs lm-eval on the same model, file and dtype.

Times, in one run and end to end (process start, model load, inference, scoring, exit):
  - ours, cold: `themis run --task crows_pairs --skip-reports` (the partition's five assets
    through the Dagster job, vLLM in the run's process) with a fresh warehouse and instance, at
    the default model's `dtype: auto` (bf16 where the CPU computes it natively, float32 elsewhere)
    or at `--dtype`;
  - ours, vLLM server mode (`THEMIS_ENGINE=vllm-server`): one run that starts `vllm serve`,
    then the run that matters, a new process attaching to the warm server;
  - peers, lm-eval 0.4.13 on the same model folder and the same 1508-pair CSV (an lm-eval task
    YAML that is crows_pairs_english over the mirror): its vLLM backend at its default dtype
    (`auto`: the model's own, bf16; peer `vllm`) and at float32 (peer `vllm-fp32`), through
    bench/lm_eval_vllm.py; its HF backend in fp32 (peer `hf-fp32`, batch 16) and, on request, at
    its default dtype (peer `hf`: bf16, which an AVX2-only CPU emulates).
Every vLLM process gets the same thread binding (both cores). Prints each time, where our
seconds went (engine vs everything else), the ratios, and every run's metrics; ours and the
lm-eval vLLM peer at the same dtype must agree to every digit (said in a line), and HF in fp32
is within 0.003 of float32 vLLM.

Run it on the AVX2 path of an AVX-512 machine with `THEMIS_CPU_ISA=avx2 PYTHONPATH=bench/cpu_isa`
(every process of the bench, lm-eval's included, then runs as on an AVX2-only CPU). With
``--rounds N`` it times ours and each peer N times, interleaved (the server mode in the first
round only), and ends with each contender's best and median and the median of the per-round
ratios. The figures go to ``bench/results/crows_pairs[.<dtype>]-<isa>.json`` (bench/results.py), with the
targets: lm-eval HF at its default / ours >= 3x, lm-eval vLLM at its default / ours >= 1.5x, and
everything outside the engine under 10% of our run.

    .venv/bin/python bench/crows_pairs.py [--rounds 3] [--peers hf-fp32,vllm,vllm-fp32] [--dtype float32]
        [--hf-batch-size 16] [--no-warm] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import Peer, Target, target, write_result  # noqa: E402
from themis_dagster.datasets import resolve_file  # noqa: E402
from themis_dagster.engines.precision import config_dtype, resolve_dtype, this_gpu  # noqa: E402
from themis_dagster.engines.vllm.engine import configure_cpu_threads  # noqa: E402
from themis_dagster.engines.vllm.server import VLLMServerManager  # noqa: E402
from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models  # noqa: E402
from themis_dagster.registry.weights import resolve_weights  # noqa: E402
from themis_dagster.settings import Settings  # noqa: E402

BIN = Path(sys.executable).parent


def timed(command: list[str], env: dict[str, str], log: Path, allow_failure: bool = False) -> tuple[float, int]:
    started = time.perf_counter()
    with log.open("w") as handle:
        result = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0 and not allow_failure:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}); see {log}")
    return elapsed, result.returncode


RUN_LINE = re.compile(r"ok in ([\d.]+) s \(engine: load ([\d.]+) s, inference ([\d.]+) s\)")
SHUTDOWN_LINE = re.compile(r"engines shut down in ([\d.]+) s")


def time_split(log: str, total: float) -> dict[str, float]:
    """Where our end-to-end seconds went, from the lines ``themis run`` prints.

    engine = import + load + inference + shutdown; in-run other = the Dagster run minus the
    engine (rendering, judging, bootstrap CIs, DuckDB writes, Dagster's own steps);
    process = interpreter start, the CLI's imports and the Dagster instance.
    """
    run_match, shutdown_match = RUN_LINE.search(log), SHUTDOWN_LINE.search(log)
    if run_match is None or shutdown_match is None:
        sys.exit("could not find the run and shutdown lines in themis run's output")
    run, load, inference = (float(value) for value in run_match.groups())
    shutdown = float(shutdown_match.group(1))
    return {
        "total": total,
        "engine_load": load,
        "inference": inference,
        "engine_shutdown": shutdown,
        "in_run_other": run - load - inference,
        "process_other": total - run - shutdown,
    }


def run_ours(
    work: Path, base_env: dict[str, str], name: str, engine: str = "vllm"
) -> tuple[dict[str, float], dict[str, float]]:
    """``themis run`` on a fresh warehouse and Dagster instance; ``engine`` picks the resource."""
    home = work / f"{name}_dagster_home"
    home.mkdir()
    env = base_env | {
        "THEMIS_WAREHOUSE": str(work / f"{name}.duckdb"),
        "DAGSTER_HOME": str(home),
        "THEMIS_TASK_OVERRIDES": "",
        "THEMIS_ENGINE": engine,
        "THEMIS_SERVER_STATE_DIR": str(work / "servers"),
    }
    command = [str(BIN / "themis"), "run", "--task", "crows_pairs", "--skip-reports"]
    seconds, _ = timed(command, env, work / f"{name}.log")
    split = time_split((work / f"{name}.log").read_text(), seconds)
    import duckdb

    with duckdb.connect(str(work / f"{name}.duckdb"), read_only=True) as conn:
        rows = conn.execute(
            "SELECT metric, value FROM metrics WHERE task = 'crows_pairs' AND subset IS NULL"
        ).fetchall()
    return split, {metric: value for metric, value in rows}


def report_ours(label: str, split: dict[str, float], metrics: dict[str, float]) -> None:
    total = split["total"]
    print(f"{label}: {total:.1f} s  {metrics}", flush=True)
    print("  " + ", ".join(f"{key} {value:.1f} s" for key, value in split.items()), flush=True)
    outside = split["in_run_other"] + split["process_other"]
    print(f"  outside the engine: {outside:.1f} s = {outside / total:.1%} of the run "
          f"(in the Dagster run {split['in_run_other'] / total:.1%}, "
          f"process start and CLI {split['process_other'] / total:.1%})", flush=True)  # fmt: skip


def lm_eval_tasks(work: Path, data_file: Path) -> Path:
    """The crows_pairs_english definition over the mirror file, as an lm-eval include path."""
    tasks = work / "lm_eval_tasks"
    if not tasks.exists():
        shutil.copytree(ROOT / "bench" / "lm_eval_tasks", tasks)
        yaml_path = tasks / "crows_pairs_mirror" / "crows_pairs_mirror.yaml"
        yaml_path.write_text(yaml_path.read_text().replace("{{DATA_FILE}}", str(data_file)))
    return tasks


# lm-eval's peers: peer name -> (backend, the `dtype` model argument, how the report names it).
# `auto` is lm-eval's default: the dtype in the model's config.json (bf16 for the default model).
PEERS = {
    "hf": ("hf", "auto", "lm-eval HF backend (its default dtype=auto: bf16)"),
    "hf-fp32": ("hf", "float32", "lm-eval HF backend (fp32)"),
    "vllm": ("vllm", "auto", "lm-eval vLLM backend (its default dtype=auto: bf16)"),
    "vllm-fp32": ("vllm", "float32", "lm-eval vLLM backend (float32)"),
}
DEFAULT_PEERS = "hf-fp32,vllm,vllm-fp32"


def models_file_at(dtype: str, folder: Path, models_file: Path) -> Path:
    """The project's models file with every model at ``dtype``."""
    import yaml

    data = yaml.safe_load(models_file.read_text())
    for model in data["models"]:
        model["dtype"] = dtype
    path = folder / f"models-{dtype}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_lm_eval(
    work: Path, base_env: dict[str, str], backend: str, model_args: str, data_file: Path, batch: str, tag: str = ""
) -> tuple[float, dict[str, float]]:
    """lm-eval 0.4.13 end to end, in its own process, with the HF or the vLLM backend."""
    name = f"lm_eval_{backend}{tag}"
    out = work / f"{name}_out"
    launcher = [str(BIN / "lm_eval")] if backend == "hf" else [sys.executable, str(ROOT / "bench" / "lm_eval_vllm.py")]
    command = [
        *launcher, "--model", backend, "--model_args", model_args,
        "--tasks", "crows_pairs_mirror", "--include_path", str(lm_eval_tasks(work, data_file)),
        "--batch_size", batch, "--output_path", str(out),
        *(["--device", "cpu"] if backend == "hf" else []),
    ]  # fmt: skip
    env = base_env | {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    # lm-eval's vLLM run aborts in its teardown with both cores bound ("terminate called
    # without an active exception") after writing its results: time it to its exit, say so
    seconds, returncode = timed(command, env, work / f"{name}.log", allow_failure=True)
    result_files = list(out.rglob("results_*.json"))
    if not result_files:
        sys.exit(f"lm-eval {backend} wrote no results (exit {returncode}); see {work / f'{name}.log'}")
    if returncode != 0:
        print(f"  (lm-eval {backend} exited {returncode} after writing its results)", flush=True)
    result_file = result_files[0]
    results = json.loads(result_file.read_text())["results"]["crows_pairs_mirror"]
    return seconds, {
        key.split(",")[0]: value for key, value in results.items() if key.endswith(",none") and "stderr" not in key
    }


def summarize(times: dict[str, list[float]]) -> None:
    """Per contender: every round, the best and the median; per peer, the ratio per round and of the best times.

    The machine's speed drifts between runs (the same run of ours took 35-46 s within an
    hour), so each round times ours and then each peer back to back, and the ratio that
    counts is the median of the per-round ratios.
    """
    print("summary over rounds (seconds):", flush=True)
    for name, values in times.items():
        listed = ", ".join(f"{value:.1f}" for value in values)
        print(f"  {name}: {listed}; best {min(values):.1f}, median {statistics.median(values):.1f}", flush=True)
    ours = times["ours"]
    for peer in (name for name in times if name.startswith("lm-eval")):
        per_round = [theirs / mine for theirs, mine in zip(times[peer], ours, strict=True)]
        listed = ", ".join(f"{ratio:.2f}x" for ratio in per_round)
        print(f"  ratio {peer} / ours per round: {listed}; median {statistics.median(per_round):.2f}x, "
              f"of the best times {min(times[peer]) / min(ours):.2f}x", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--peers", default=DEFAULT_PEERS, help=f"comma-separated peers: {', '.join(PEERS)}")
    parser.add_argument("--dtype", help="run ours at this dtype (default: the registry's, dtype: auto)")
    parser.add_argument("--hf-batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1, help="time ours and every peer this many times, interleaved")
    parser.add_argument("--no-warm", dest="warm", action="store_false", help="skip the vLLM server-mode runs")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (new) and keep every run's log and output there")
    args = parser.parse_args()
    settings = Settings.from_env()
    spec = load_models(settings.models_file)[DEFAULT_MODEL_ID]
    if args.dtype:
        spec = spec.model_copy(update={"dtype": args.dtype})
    weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
    ours_dtype = resolve_dtype(spec, Path(weights.path), this_gpu())
    auto_dtype = config_dtype(Path(weights.path)) or "bfloat16"  # what lm-eval's dtype=auto loads the model in
    data_file = resolve_file("crows_pairs", "crows_pairs_anonymized.csv",
                             datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir).path  # fmt: skip
    # every vLLM process (ours and lm-eval's) gets the same thread binding: both cores
    configure_cpu_threads()
    env = dict(os.environ)
    print(f"VLLM_CPU_OMP_THREADS_BIND={env.get('VLLM_CPU_OMP_THREADS_BIND', '')} for every run", flush=True)
    print(f"ours at {ours_dtype.dtype} ({ours_dtype.reason})", flush=True)
    peers = args.peers.split(",")
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        parser.error(f"--peers: unknown peer(s) {', '.join(unknown)}; choose from {', '.join(PEERS)}")
    times: dict[str, list[float]] = {"ours": []}
    outside: list[float] = []  # share of our run outside the engine, per round
    metrics: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="themis-bench-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        if args.keep:
            work.mkdir(parents=True)
        if args.dtype:
            env["THEMIS_MODELS_FILE"] = str(models_file_at(args.dtype, work, settings.models_file))
        for round_number in range(1, args.rounds + 1):
            tag = f"_r{round_number}" if args.rounds > 1 else ""
            if args.rounds > 1:
                print(f"round {round_number} of {args.rounds}", flush=True)
            split, metrics["ours"] = run_ours(work, env, f"ours{tag}")
            ours_s = split["total"]
            times["ours"].append(ours_s)
            outside.append((split["in_run_other"] + split["process_other"]) / ours_s)
            report_ours(f"ours (themis run --task crows_pairs, in-process vLLM {ours_dtype.dtype}, cold)",
                        split, metrics["ours"])  # fmt: skip
            warm = None
            if args.warm and round_number == 1:
                # the vLLM server mode: the first run starts `vllm serve`, the second attaches to it warm
                starting, _ = run_ours(work, env, "ours_server_start", engine="vllm-server")
                report_ours("ours, vLLM server mode, run that starts the server", starting, {})
                warm, metrics["ours (vLLM server mode)"] = run_ours(work, env, "ours_server_warm", engine="vllm-server")
                report_ours("ours, vLLM server mode, next run (warm server)", warm, metrics["ours (vLLM server mode)"])
                times.setdefault("ours (vLLM server mode, warm)", []).append(warm["total"])
                VLLMServerManager(work / "servers").stop(DEFAULT_MODEL_ID)
            for peer in peers:
                backend, dtype, label = PEERS[peer]
                if backend == "hf":
                    model_args, batch = f"pretrained={weights.path},dtype={dtype}", str(args.hf_batch_size)
                else:
                    model_args = (f"pretrained={weights.path},dtype={dtype},gpu_memory_utilization=0.3,"
                                  f"max_model_len=2048,seed={spec.engine.seed}")  # fmt: skip
                    batch = "auto"
                peer_s, metrics[label] = run_lm_eval(work, env, backend, model_args, data_file, batch, f"_{peer}{tag}")
                times.setdefault(label, []).append(peer_s)
                print(f"peer {label}: {peer_s:.1f} s  {metrics[label]}", flush=True)
                print(f"ratio {label} / ours: {peer_s / ours_s:.2f}x", flush=True)
                if warm is not None:
                    print(f"ratio {label} / ours with a warm server: {peer_s / warm['total']:.2f}x", flush=True)
                same = (auto_dtype if dtype == "auto" else dtype) == ours_dtype.dtype
                if backend == "vllm" and same:
                    equal = all(metrics[label].get(key) == value for key, value in metrics["ours"].items())
                    print(f"ours and {label} at the same dtype ({ours_dtype.dtype}): metrics "
                          f"{'equal to every digit' if equal else 'DIFFER'}", flush=True)  # fmt: skip
        if args.rounds > 1:
            summarize(times)
    ratios = {
        name: statistics.median([theirs / mine for theirs, mine in zip(values, times["ours"], strict=True)])
        for name, values in times.items()
        if name.startswith("lm-eval")
    }
    figures = {
        "ours_dtype": ours_dtype.dtype,
        "ours_dtype_reason": ours_dtype.reason,
        "seconds": times,
        "median_seconds": {name: statistics.median(values) for name, values in times.items()},
        "ratio_to_ours": ratios,
        "metrics": metrics,
        "outside_the_engine": outside,
    }
    share = statistics.median(outside)
    goals = {PEERS["hf"][2]: 3.0, PEERS["vllm"][2]: 1.5}  # the targets, against each peer at its default
    targets: list[Target] = [
        target(f"{label} / ours >= {goal:g}x", ratios[label] >= goal)
        for label, goal in goals.items()
        if label in ratios
    ]
    targets.append(target("outside the engine < 10% of our run", share < 0.10))
    write_result(
        "crows_pairs",
        figures,
        summary=f"1508 pairs, ours at {ours_dtype.dtype}: {statistics.median(times['ours']):.1f} s end to end "
        f"(median of {args.rounds}), outside the engine {share:.1%}",
        peers=[Peer(ratio_of=f"{label} / ours", ratio=ratio) for label, ratio in ratios.items()],
        targets=targets,
        case=args.dtype,
    )


if __name__ == "__main__":
    main()
