"""Benchmark: the battery both platforms have, ours against lm-eval's vLLM backend, end to end.

The tasks lm-eval 0.4.13 also has: CrowS-Pairs English, BBQ (the mirror's seven categories),
Winogender, DiscrimEval explicit, EsBBQ and CaBBQ, at the sizes of ``bench/battery_sizes.yaml``.
Ours: one ``themis run`` for all six tasks (one engine load, in-process vLLM at the default model's
``dtype: auto``: bf16 where the CPU computes it natively, float32 elsewhere). The peer: one lm-eval
invocation with its vLLM backend at the same dtype (same thread binding, same model folder)
for the same six tasks, each its lm-eval definition (prompt, choices, scoring; read from the
installed package) pointed at a JSONL of exactly the rows our sizes select, written from the
mirror files (no download on either side).

Every round starts from an empty warehouse, Dagster instance and request cache on our side and
an empty datasets cache on lm-eval's, so no answer is reused from an earlier round; the two
sides alternate within a round and the first side alternates between rounds. Prints each
round's times, where our time went (engine load, inference per task, the rest), every metric of
both sides next to each other, and ends with the line
``ratio lm-eval vLLM / ours: <median of the per-round ratios>x``; the figures go to
``bench/results/battery-<isa>.json`` with the target: ours at least 2x faster end to end. On the AVX2
path of an AVX-512 machine: prefix the command with ``THEMIS_CPU_ISA=avx2 PYTHONPATH=bench/cpu_isa``.

    .venv/bin/python bench/battery.py [--rounds 3] [--sizes bench/battery_sizes.yaml] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.crows_pairs import lm_eval_tasks, timed  # noqa: E402
from bench.results import peer, target, write_result  # noqa: E402
from themis_dagster.datasets import resolve_file  # noqa: E402
from themis_dagster.engines.precision import resolve_dtype, this_gpu  # noqa: E402
from themis_dagster.engines.vllm.engine import configure_cpu_threads  # noqa: E402
from themis_dagster.registry.models import DEFAULT_MODEL_ID, load_models  # noqa: E402
from themis_dagster.registry.weights import resolve_weights  # noqa: E402
from themis_dagster.settings import Settings  # noqa: E402
from themis_dagster.tasks.loader import load_overrides, load_task  # noqa: E402

BIN = Path(sys.executable).parent
LM_EVAL_TASKS = Path(__import__("lm_eval.tasks", fromlist=["__file__"]).__file__).parent

DISCRIM_EVAL_METRICS = ("black_bias", "asian_bias", "hispanic_bias", "native_american_bias", "female_bias",
                        "non_binary_bias", "age_bias")  # fmt: skip
ES_CA_BBQ_METRICS = ("acc_ambig", "acc_disambig", "bias_score_ambig", "bias_score_disambig")
BBQ_METRICS = {"accuracy_ambig": "accuracy_amb", "accuracy_disambig": "accuracy_disamb",
               "s_amb": "amb_bias_score", "s_dis": "disamb_bias_score"}  # fmt: skip
# Our task -> (lm-eval's task folder, the YAML there that defines it, our metric -> lm-eval's metric).
PEER_TASKS: dict[str, tuple[str, str, dict[str, str]]] = {
    "bbq": ("bbq", "bbq_multiple_choice.yaml", BBQ_METRICS),
    "winogender": ("winogender", "winogender.yaml", {"accuracy": "acc"}),
    "discrim_eval": ("discrim_eval", "discrim_eval_explicit.yaml", {m: m for m in DISCRIM_EVAL_METRICS}),
    "esbbq": ("esbbq", "_esbbq_common_yaml", {m: m for m in ES_CA_BBQ_METRICS}),
    "cabbq": ("cabbq", "_cabbq_common_yaml", {m: m for m in ES_CA_BBQ_METRICS}),
}
CROWS_METRICS = {"pct_stereotype": "pct_stereotype", "likelihood_diff": "likelihood_diff"}
TASKS = ["crows_pairs", *PEER_TASKS]


def peer_task_name(task: str) -> str:
    return "crows_pairs_mirror" if task == "crows_pairs" else f"{task}_battery"


def _bbq_rows(paths: dict[str, Path], items: list[Any]) -> list[dict[str, Any]]:
    """The mirror's own BBQ rows (lm-eval's process_docs reads answer_info and additional_metadata)."""
    wanted = {item.item_id for item in items}
    rows: dict[str, dict[str, Any]] = {}
    for path in paths.values():
        with path.open() as handle:
            for line in handle:
                row = json.loads(line)
                key = f"{row['category']}:{row['example_id']}"
                if key in wanted:
                    rows[key] = row
    return [rows[item.item_id] for item in items]


def _item_fields(paths: dict[str, Path], items: list[Any]) -> list[dict[str, Any]]:
    """Our items' fields: the dataset's columns under lm-eval's (Hugging Face) names."""
    del paths
    return [dict(item.fields) for item in items]


PEER_ROWS: dict[str, Callable[[dict[str, Path], list[Any]], list[dict[str, Any]]]] = {
    "bbq": _bbq_rows,
    "winogender": _item_fields,
    "discrim_eval": _item_fields,
    "esbbq": _item_fields,
    "cabbq": _item_fields,
}


def selected_items(task: str, overrides: dict[str, Any], settings: Settings) -> tuple[dict[str, Path], list[Any]]:
    """The items ``themis run`` evaluates for ``task`` at these sizes, and the files they came from."""
    loaded = load_task(task, overrides)
    paths = {
        name: resolve_file(loaded.spec.dataset, name, datasets_dir=settings.datasets_dir,
                           cache_dir=settings.cache_dir, allow_download=False).path
        for name in loaded.spec.files
    }  # fmt: skip
    return paths, list(loaded.module.load_items(paths, loaded.params))


def _peer_yaml(task: str, data_file: Path) -> str:
    """lm-eval's own definition of the task, its dataset replaced by ``data_file`` (one JSON split)."""
    folder, yaml_name, _ = PEER_TASKS[task]
    lines = (LM_EVAL_TASKS / folder / yaml_name).read_text().splitlines()
    split = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("test_split:")), "test")
    kept: list[str] = []
    in_tag = False
    for line in lines:
        if in_tag and line.startswith("  "):
            continue
        in_tag = line.startswith("tag:")
        if in_tag or re.match(r"(task|dataset_path|dataset_name|dataset_kwargs|include):", line):
            continue
        kept.append(line)
    head = [
        f"task: {peer_task_name(task)}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f'    {split}: "{data_file}"',
    ]
    return "\n".join(head + kept) + "\n"


def write_peer_tasks(work: Path, sizes: dict[str, dict[str, Any]], settings: Settings) -> tuple[Path, dict[str, int]]:
    """lm-eval task folders over the rows our sizes select; returns the include path and each task's size."""
    crows_file = resolve_file("crows_pairs", "crows_pairs_anonymized.csv", datasets_dir=settings.datasets_dir,
                              cache_dir=settings.cache_dir).path  # fmt: skip
    include = lm_eval_tasks(work, crows_file)
    counts: dict[str, int] = {}
    _, crows_items = selected_items("crows_pairs", sizes.get("crows_pairs", {}), settings)
    with crows_file.open(newline="") as handle:
        crows_rows = sum(1 for _ in csv.DictReader(handle))
    if len(crows_items) != crows_rows:
        sys.exit(f"the battery's crows_pairs must be the whole file ({crows_rows} pairs), not {len(crows_items)}")
    counts["crows_pairs"] = len(crows_items)
    for task in PEER_TASKS:
        paths, items = selected_items(task, sizes.get(task, {}), settings)
        folder = include / peer_task_name(task)
        folder.mkdir(parents=True, exist_ok=True)
        data_file = folder / "docs.jsonl"
        with data_file.open("w") as handle:
            for row in PEER_ROWS[task](paths, items):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        (folder / f"{peer_task_name(task)}.yaml").write_text(_peer_yaml(task, data_file))
        (folder / "utils.py").write_text(
            f'"""lm-eval\'s own {PEER_TASKS[task][0]} functions."""\n\n'
            f"from lm_eval.tasks.{PEER_TASKS[task][0]}.utils import *  # noqa: F403\n"
        )
        counts[task] = len(items)
    return include, counts


TASK_LINE = re.compile(r"\|(\w+): (\w+) in ([\d.]+) s(?: \(engine: load ([\d.]+) s, inference ([\d.]+) s\))?")


def run_ours(work: Path, env: dict[str, str], name: str, sizes_file: Path) -> tuple[float, dict[str, Any], dict]:
    """One ``themis run`` for the battery on an empty warehouse, instance and request cache."""
    home = work / f"{name}_dagster_home"
    home.mkdir()
    run_env = env | {
        "THEMIS_WAREHOUSE": str(work / f"{name}.duckdb"),
        "DAGSTER_HOME": str(home),
        "THEMIS_TASK_OVERRIDES": str(sizes_file),
    }
    command = [str(BIN / "themis"), "run", *(arg for task in TASKS for arg in ("--task", task)), "--skip-reports"]
    seconds, _ = timed(command, run_env, work / f"{name}.log")
    log = (work / f"{name}.log").read_text()
    split: dict[str, Any] = {"load": 0.0, "inference": {}, "task_runs": 0.0}
    for task, status, run_s, load, inference in TASK_LINE.findall(log):
        if status != "ok":
            sys.exit(f"themis run: {task} {status}; see {work / f'{name}.log'}")
        split["load"] += float(load or 0)
        split["inference"][task] = float(inference or 0)
        split["task_runs"] += float(run_s)
    import duckdb

    with duckdb.connect(str(work / f"{name}.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT task, metric, value FROM metrics WHERE subset IS NULL").fetchall()
    metrics: dict[str, dict[str, float]] = {}
    for task, metric, value in rows:
        metrics.setdefault(task, {})[metric] = value
    return seconds, split, metrics


def run_peer(work: Path, env: dict[str, str], name: str, include: Path, model_args: str) -> tuple[float, dict]:
    """lm-eval's vLLM backend, one invocation for the six tasks, with an empty datasets cache."""
    out = work / f"{name}_out"
    command = [
        sys.executable, str(ROOT / "bench" / "lm_eval_vllm.py"), "--model", "vllm", "--model_args", model_args,
        "--tasks", ",".join(peer_task_name(task) for task in TASKS), "--include_path", str(include),
        "--batch_size", "auto", "--output_path", str(out),
    ]  # fmt: skip
    run_env = env | {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(work / f"{name}_hf")}
    seconds, returncode = timed(command, run_env, work / f"{name}.log", allow_failure=True)
    result_files = list(out.rglob("results_*.json"))
    if not result_files:
        sys.exit(f"lm-eval wrote no results (exit {returncode}); see {work / f'{name}.log'}")
    if returncode != 0:
        print(f"  (lm-eval exited {returncode} after writing its results)", flush=True)
    results = json.loads(result_files[0].read_text())["results"]
    return seconds, {task: _headline(values) for task, values in results.items()}


def _headline(values: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's unfiltered metric values (``<metric>,none``) by metric name, without their stderr."""
    return {key.split(",")[0]: value for key, value in values.items() if key.endswith(",none") and "stderr" not in key}


def print_metrics(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, Any]]) -> float:
    """Every compared metric of both sides next to each other, with their difference; returns the largest."""
    largest = 0.0
    for task in TASKS:
        mapping = CROWS_METRICS if task == "crows_pairs" else PEER_TASKS[task][2]
        peer = theirs.get(peer_task_name(task), {})
        for metric, peer_metric in mapping.items():
            mine, other = ours.get(task, {}).get(metric), peer.get(peer_metric)
            both = isinstance(mine, float) and isinstance(other, (float, int))
            gap = f"{abs(mine - other):.2e}" if both else "-"  # type: ignore[operator]
            largest = max(largest, abs(mine - other) if both else float("inf"))  # type: ignore[operator]
            print(f"  {task}.{metric}: ours {mine}  lm-eval {peer_metric} {other}  |diff| {gap}", flush=True)
    return largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sizes", type=Path, default=ROOT / "bench" / "battery_sizes.yaml")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (new) and keep every run's log and output there")
    args = parser.parse_args()
    settings = Settings.from_env()
    spec = load_models(settings.models_file)[DEFAULT_MODEL_ID]
    weights = resolve_weights(spec, settings.models_dir, settings.cache_dir)
    sizes = load_overrides(args.sizes)
    configure_cpu_threads()  # every vLLM process (ours and lm-eval's) binds both cores the same way
    env = dict(os.environ)
    dtype = resolve_dtype(spec, Path(weights.path), this_gpu())
    print(f"both sides at {dtype.dtype} ({dtype.reason})", flush=True)
    model_args = (f"pretrained={weights.path},dtype={dtype.dtype},gpu_memory_utilization=0.3,"
                  f"max_model_len=2048,seed={spec.engine.seed}")  # fmt: skip
    ratios: list[float] = []
    times: dict[str, list[float]] = {"ours": [], "lm-eval vLLM backend": []}
    largest_gaps: list[float] = []
    with tempfile.TemporaryDirectory(prefix="themis-battery-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        include, counts = write_peer_tasks(work, sizes, settings)
        print("items per task (both sides): " + ", ".join(f"{t} {n}" for t, n in counts.items()), flush=True)
        for number in range(1, args.rounds + 1):
            print(f"round {number} of {args.rounds}", flush=True)
            order = ["ours", "peer"] if number % 2 else ["peer", "ours"]
            for side in order:
                started = time.strftime("%H:%M:%S")
                if side == "ours":
                    ours_s, split, ours_metrics = run_ours(work, env, f"ours_r{number}", args.sizes)
                    inference = sum(split["inference"].values())
                    print(f"ours (one themis run, six tasks; started {started}): {ours_s:.1f} s = engine load "
                          f"{split['load']:.1f} s + inference {inference:.1f} s "
                          f"({', '.join(f'{t} {s:.1f}' for t, s in split['inference'].items())}) + the rest "
                          f"{ours_s - split['load'] - inference:.1f} s (Dagster runs, judging, metrics, "
                          "process start)", flush=True)  # fmt: skip
                else:
                    peer_s, peer_metrics = run_peer(work, env, f"lm_eval_r{number}", include, model_args)
                    print(f"lm-eval vLLM backend (one invocation, six tasks; started {started}): {peer_s:.1f} s",
                          flush=True)  # fmt: skip
            ratios.append(peer_s / ours_s)
            times["ours"].append(ours_s)
            times["lm-eval vLLM backend"].append(peer_s)
            print(f"round {number}: ratio lm-eval vLLM / ours {ratios[-1]:.2f}x", flush=True)
            largest_gaps.append(print_metrics(ours_metrics, peer_metrics))
    print(f"per-round ratios: {', '.join(f'{r:.2f}x' for r in ratios)}", flush=True)
    print(f"ratio lm-eval vLLM / ours: {statistics.median(ratios):.2f}x", flush=True)
    ratio = statistics.median(ratios)
    write_result(
        "battery",
        {
            "dtype": dtype.dtype,
            "dtype_reason": dtype.reason,
            "items": counts,
            "seconds": times,
            "ratio_to_ours": {"lm-eval vLLM backend": statistics.median(ratios)},
            "largest_metric_difference": max(largest_gaps),
            "metrics": {"ours": ours_metrics, "lm-eval vLLM backend": peer_metrics},
        },
        summary=f"six tasks ({sum(counts.values()):,} items) at {dtype.dtype}, one themis run: ours "
        f"{statistics.median(times['ours']):.1f} s end to end (median of {args.rounds}); largest metric difference "
        f"{max(largest_gaps):.2g} (BBQ's included)",
        peers=[peer("lm-eval vLLM / ours", ratio)],
        targets=[target("lm-eval vLLM / ours >= 2x", ratio >= 2.0)],
    )


if __name__ == "__main__":
    main()
