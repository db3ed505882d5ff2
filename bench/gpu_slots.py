"""Benchmark: a backfill of 4 models x 3 tasks on a simulated 4-GPU host, four GPU slots against one.

The real queue: a ``dagster-daemon`` with the instance settings of ``deploy/dagster.multi-gpu.yaml``
(run-granularity pool ``engine``, one run per model at a time) launches the backfill's runs, each
in its own process; each run claims its device (``themis_dagster/runs/devices.py``). The engine is the
fake one with a fixed latency per batch (``--latency``), standing in for a GPU's batch time, so the
wall time is the queue's doing. Both settings run in this one invocation, on fresh instances and
warehouses; printed: each setting's wall time (first run created to last run ended), the peak
number of runs at once, a check that no two overlapping runs held the same device, and the ratio.
Target: four slots take at most 0.35x the wall time of one. The figures go to
``bench/results/gpu_slots-<isa>.json`` (bench/results.py).

    .venv/bin/python bench/gpu_slots.py [--latency 40] [--limit 4]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from safetensors.numpy import save_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import peer, target, write_result  # noqa: E402

BIN = Path(sys.executable).parent
MODELS = ["sim-a", "sim-b", "sim-c", "sim-d"]
TASKS = ["crows_pairs", "crows_pairs_mc", "crows_pairs_prompted"]
GPUS = ["0", "1", "2", "3"]


def _deployment(folder: Path, slots: int, latency: float, limit: int) -> dict[str, str]:
    """A fresh instance (the multi-GPU settings with ``slots`` GPUs), registry, warehouse; its environment."""
    home = folder / "dagster_home"
    home.mkdir(parents=True)
    config = yaml.safe_load((ROOT / "deploy" / "dagster.multi-gpu.yaml").read_text())
    config["concurrency"]["pools"]["default_limit"] = slots
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    checkpoint = folder / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"max_position_embeddings": 512}))
    save_file({"w": np.zeros((2, 2), dtype=np.float32)}, str(checkpoint / "model.safetensors"))
    models = [{"id": model, "source": {"kind": "local", "path": str(checkpoint)}} for model in MODELS]
    (folder / "models.yaml").write_text(yaml.safe_dump({"models": models}))
    (folder / "profile.yaml").write_text(yaml.safe_dump({task: {"limit": limit} for task in TASKS}))
    (folder / "workspace.yaml").write_text(
        yaml.safe_dump(
            {
                "load_from": [
                    {
                        "python_file": {
                            "relative_path": str(ROOT / "bench" / "gpu_slots_location.py"),
                            "working_directory": str(ROOT),
                            "location_name": "bench",
                        }
                    }
                ]
            }
        )
    )
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("THEMIS_", "DAGSTER_"))}
    return inherited | {
        "DAGSTER_HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "THEMIS_ENGINE": "fake",
        "THEMIS_DEVICES": ",".join(GPUS[:slots]),
        "THEMIS_BENCH_BATCH_LATENCY_S": str(latency),
        "THEMIS_MODELS_FILE": str(folder / "models.yaml"),
        "THEMIS_DISCOVERED_MODELS_FILE": str(folder / "discovered.yaml"),
        "THEMIS_WAREHOUSE": str(folder / "warehouse.duckdb"),
        "THEMIS_TASK_OVERRIDES": str(folder / "profile.yaml"),
        "THEMIS_CACHE_DIR": os.environ.get("THEMIS_CACHE_DIR", str(ROOT / "data" / "cache")),
        "THEMIS_MODELS_DIR": str(folder / "models"),
        "THEMIS_REPORTS_DIR": str(folder / "reports"),
        "THEMIS_EXPORTS_DIR": str(folder / "exports"),
        "THEMIS_REQUEST_CACHE": "false",
    }


def _runs(home: str) -> list[dict[str, object]]:
    """The instance's runs: status, devices, start and end (read in a child: DAGSTER_HOME differs per setting)."""
    code = (
        "import json,sys\nfrom dagster import DagsterInstance\n"
        "with DagsterInstance.from_config(sys.argv[1]) as i:\n"
        " print(json.dumps([{'status': r.dagster_run.status.value, 'devices': r.dagster_run.tags.get('themis/devices'),"
        " 'model': r.dagster_run.tags.get('dagster/partition/model'), 'created': r.create_timestamp.timestamp(),"
        " 'claimed': r.dagster_run.tags.get('themis/devices_claimed_at'),"
        " 'released': r.dagster_run.tags.get('themis/devices_released_at'),"
        " 'start': r.start_time, 'end': r.end_time} for r in i.get_run_records()]))"
    )
    out = subprocess.run([str(BIN / "python"), "-c", code, home], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def measure(slots: int, latency: float, limit: int, folder: Path) -> dict[str, object]:
    env = _deployment(folder, slots, latency, limit)
    home = env["DAGSTER_HOME"]
    add = f"from dagster import DagsterInstance\nDagsterInstance.get().add_dynamic_partitions('models', {MODELS!r})"
    subprocess.run([str(BIN / "python"), "-c", add], env=env, check=True)
    log = (folder / "daemon.log").open("w")
    daemon = subprocess.Popen(
        [str(BIN / "dagster-daemon"), "run", "-w", str(folder / "workspace.yaml")],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        keys = ",".join(f"{model}|{task}" for model in MODELS for task in TASKS)
        subprocess.run(
            [
                str(BIN / "dagster"),
                "job",
                "backfill",
                "-j",
                "evaluate",
                "-w",
                str(folder / "workspace.yaml"),
                "--partitions",
                keys,
                "--noprompt",
            ],
            env=env,
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 3600
        while time.monotonic() < deadline:
            runs = _runs(home)
            done = [run for run in runs if run["status"] in ("SUCCESS", "FAILURE", "CANCELED")]
            if len(runs) == len(MODELS) * len(TASKS) and len(done) == len(runs):
                break
            time.sleep(5)
        else:
            raise TimeoutError(f"backfill with {slots} slot(s) did not finish; see {folder / 'daemon.log'}")
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=60)
        log.close()
    failed = [run for run in runs if run["status"] != "SUCCESS"]
    if failed:
        raise RuntimeError(f"{len(failed)} run(s) failed with {slots} slot(s); see {folder}")
    wall = max(float(run["end"]) for run in runs) - min(float(run["created"]) for run in runs)  # type: ignore[arg-type]
    holding = [{"start": run["claimed"], "end": run["released"]} for run in runs]
    return {
        "wall_s": wall,
        "peak": _peak(runs),
        "peak_holding": _peak(holding),
        "shared": _shared_devices(runs),
        "devices": _devices_used(runs),
    }


def _devices_used(runs: list[dict[str, object]]) -> str:
    return ",".join(sorted({str(run["devices"]) for run in runs}))


def _peak(runs: list[dict[str, object]]) -> int:
    edges = sorted([(float(r["start"]), 1) for r in runs] + [(float(r["end"]), -1) for r in runs])  # type: ignore[arg-type]
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return peak


def _shared_devices(runs: list[dict[str, object]]) -> int:
    """Pairs of runs that held a common device at the same time (must be 0), from the runs' claim tags."""
    clashes = 0
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            overlap = float(a["claimed"]) < float(b["released"]) and float(b["claimed"]) < float(a["released"])  # type: ignore[arg-type]
            common = set(str(a["devices"]).split(",")) & set(str(b["devices"]).split(","))
            clashes += bool(overlap and common)
    return clashes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=40.0, help="seconds per engine batch")
    parser.add_argument("--limit", type=int, default=4, help="items per task")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpu-slots-") as tmp:
        for slots in (4, 1):
            results[slots] = measure(slots, args.latency, args.limit, Path(tmp) / f"slots-{slots}")
            print(
                f"{slots} GPU slot(s): wall {results[slots]['wall_s']:.1f} s, peak {results[slots]['peak']} "
                f"runs at once ({results[slots]['peak_holding']} holding devices), "
                f"devices used {results[slots]['devices']}, "
                f"runs holding one device at the same time: {results[slots]['shared']}",
                flush=True,
            )
    ratio = float(results[4]["wall_s"]) / float(results[1]["wall_s"])  # type: ignore[arg-type]
    print(f"4 models x 3 tasks, batch latency {args.latency} s: 4 slots / 1 slot = {ratio:.2f}x (target <= 0.35x)")
    write_result(
        "gpu_slots",
        {
            "latency_s": args.latency,
            "limit": args.limit,
            "slots": {str(slots): result for slots, result in results.items()},
        },
        summary=f"4 models x 3 tasks at {args.latency:g} s a batch: 4 slots {float(results[4]['wall_s']):.1f} s, "  # type: ignore[arg-type]
        f"1 slot {float(results[1]['wall_s']):.1f} s; runs holding one device at once: "  # type: ignore[arg-type]
        f"{results[4]['shared']} / {results[1]['shared']}",
        peers=[peer("4 slots / 1 slot", ratio)],
        targets=[target("4 slots / 1 slot <= 0.35x", ratio <= 0.35)],
    )


if __name__ == "__main__":
    main()
