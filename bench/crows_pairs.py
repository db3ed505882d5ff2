"""Benchmark: the full `crows_pairs` partition vs lm-eval on the same model and file.

Times, in one run and end to end (process start, model load, inference, scoring, exit):
  - ours, cold: `themis run --task crows_pairs --skip-reports` (the partition's five assets
    through the Dagster job, vLLM in the run's process) with a fresh warehouse and instance;
  - ours, vLLM server mode (`THEMIS_ENGINE=vllm-server`): one run that starts `vllm serve`,
    then the run that matters, a new process attaching to the warm server;
  - peers: lm-eval 0.4.13 with its HF backend (`--model hf`, batch 16) as lm-eval runs it
    by default (`dtype=auto`: the model's own dtype, bf16 for the default model; peer
    `hf`) and in fp32 (peer `hf-fp32`), and with its vLLM backend (`--model vllm`, bf16,
    through bench/lm_eval_vllm.py; peer `vllm`), on the same model folder and the same
    1508-pair CSV, via an lm-eval task YAML that is crows_pairs_english over the mirror.
Every vLLM process gets the same thread binding (both cores). Prints each time, where our
seconds went (engine vs everything else), the ratios, and every run's metrics (ours and
lm-eval's vLLM backend agree to every digit; HF in fp32 is within 0.003 of them, HF in
bf16 takes its log-softmax in bf16 and is not).

With ``--rounds N`` it times ours and each peer N times, interleaved (the server mode in the
first round only), and ends with each contender's best and median and the median of the
per-round ratios: this machine's speed drifts by a third between runs.

    .venv/bin/python bench/crows_pairs.py [--rounds 3] [--peers hf,hf-fp32,vllm] [--hf-batch-size 16]
        [--no-warm] [--keep DIR]
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

from themis_dagster.datasets import resolve_file  # noqa: E402
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


# lm-eval's HF peers: peer name -> (the `dtype` model argument, how the report names it).
# `auto` is lm-eval's default: the dtype in the model's config.json (bf16 for the default model).
HF_PEERS = {"hf": ("auto", "lm-eval's default dtype=auto, bf16"), "hf-fp32": ("float32", "fp32")}


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
    parser.add_argument(
        "--peers", default=",".join(HF_PEERS) + ",vllm", help="comma-separated peers to time: hf, hf-fp32, vllm"
    )
    parser.add_argument("--hf-batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1, help="time ours and every peer this many times, interleaved")
    parser.add_argument("--no-warm", dest="warm", action="store_false", help="skip the vLLM server-mode runs")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (new) and keep every run's log and output there")
    args = parser.parse_args()
    settings = Settings.from_env()
    spec = load_models(settings.models_file)[DEFAULT_MODEL_ID]
    weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
    data_file = resolve_file("crows_pairs", "crows_pairs_anonymized.csv",
                             datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir).path  # fmt: skip
    # every vLLM process (ours and lm-eval's) gets the same thread binding: both cores
    configure_cpu_threads()
    env = dict(os.environ)
    print(f"VLLM_CPU_OMP_THREADS_BIND={env.get('VLLM_CPU_OMP_THREADS_BIND', '')} for every run", flush=True)
    peers = args.peers.split(",")
    unknown = sorted(set(peers) - {*HF_PEERS, "vllm"})
    if unknown:
        parser.error(f"--peers: unknown peer(s) {', '.join(unknown)}; choose from hf, hf-fp32, vllm")
    times: dict[str, list[float]] = {"ours": []}
    with tempfile.TemporaryDirectory(prefix="themis-bench-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        if args.keep:
            work.mkdir(parents=True)
        for round_number in range(1, args.rounds + 1):
            tag = f"_r{round_number}" if args.rounds > 1 else ""
            if args.rounds > 1:
                print(f"round {round_number} of {args.rounds}", flush=True)
            split, ours_metrics = run_ours(work, env, f"ours{tag}")
            ours_s = split["total"]
            times["ours"].append(ours_s)
            report_ours("ours (themis run --task crows_pairs, in-process vLLM bf16, cold)", split, ours_metrics)
            warm = None
            if args.warm and round_number == 1:
                # the vLLM server mode: the first run starts `vllm serve`, the second attaches to it warm
                starting, _ = run_ours(work, env, "ours_server_start", engine="vllm-server")
                report_ours("ours, vLLM server mode, run that starts the server", starting, {})
                warm, warm_metrics = run_ours(work, env, "ours_server_warm", engine="vllm-server")
                report_ours("ours, vLLM server mode, next run (warm server)", warm, warm_metrics)
                VLLMServerManager(work / "servers").stop(DEFAULT_MODEL_ID)
            for peer, (dtype, described) in HF_PEERS.items():
                if peer not in peers:
                    continue
                model_args = f"pretrained={weights.path},dtype={dtype}"
                hf_s, hf_metrics = run_lm_eval(work, env, "hf", model_args, data_file, str(args.hf_batch_size),
                                               f"_{dtype}{tag}")  # fmt: skip
                label = f"lm-eval HF backend ({described}, batch {args.hf_batch_size})"
                times.setdefault(label, []).append(hf_s)
                print(f"peer {label}: {hf_s:.1f} s  {hf_metrics}", flush=True)
                print(f"ratio {label} / ours: {hf_s / ours_s:.2f}x", flush=True)
                if warm is not None:
                    print(f"ratio {label} / ours with a warm server: {hf_s / warm['total']:.2f}x", flush=True)
            if "vllm" in peers:
                model_args = (f"pretrained={weights.path},dtype=bfloat16,gpu_memory_utilization=0.3,"
                              f"max_model_len=2048,seed={spec.engine.seed}")  # fmt: skip
                vllm_s, vllm_metrics = run_lm_eval(work, env, "vllm", model_args, data_file, "auto", tag)
                times.setdefault("lm-eval vLLM backend (bf16)", []).append(vllm_s)
                print(f"peer lm-eval vLLM backend (bf16): {vllm_s:.1f} s  {vllm_metrics}", flush=True)
                print(f"ratio lm-eval vLLM / ours: {vllm_s / ours_s:.2f}x", flush=True)
                if warm is not None:
                    print(f"ratio lm-eval vLLM / ours with a warm server: {vllm_s / warm['total']:.2f}x", flush=True)
        if args.rounds > 1:
            summarize(times)


if __name__ == "__main__":
    main()
