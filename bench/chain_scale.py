"""Benchmark: the platform's own cost per request, from items to metrics, at 10^3 to 10^6 requests.

Materializes the five real evaluation assets (``dagster.materialize``: task_dataset ->
rendered_prompts -> raw_responses -> judgments -> bias_metrics) of the real ``crows_pairs``
task on a fresh temporary DuckDB warehouse, with the fake engine (no latency) and a
synthetic CrowS-Pairs file of N/2 distinct pairs (two loglikelihood requests per pair),
read through a bench-only ``ThemisConfig`` that points the task's one file at it. Each
size runs in its own child process, so the peak RSS (``ru_maxrss`` of that child) is the
size's own.

Platform time is the wall time of the five steps (Dagster's step durations) less the fake
engine's own time: ``engine_seconds`` (scoring a hash per request) less ``handoff_seconds``, the
platform's own work inside the engine call as each answer is handed on (timing it, the
interval commits), which belongs to the platform. (Trees before the hand-off was timed report
none: there it counts as engine time.) The peer is the same
platform at the smallest size, measured in the same run: the last line prints the ratio of
us/request at the largest size to the smallest, and the marginal us/request between the two
largest sizes (which leaves out the fixed cost of a run: Dagster's steps, DuckDB's schema).

    .venv/bin/python bench/chain_scale.py [--max-size 1000000] [--sizes 1000,10000] [--timeout 900]

Targets, at 10^6 requests: at most 50 us of platform time per request, at most 2,048 MiB peak RSS,
and a cost per request that does not grow with size. The figures go to
``bench/results/chain_scale-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import argparse
import atexit
import bisect
import csv
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import Peer, Target, peer, target, write_result  # noqa: E402

SIZES = (1_000, 10_000, 100_000, 1_000_000)
TASK = "crows_pairs"
FILE = "crows_pairs_anonymized.csv"
STAGES = ("task_dataset", "rendered_prompts", "raw_responses", "judgments", "bias_metrics")
BIAS_TYPES = ("race-color", "gender", "socioeconomic", "nationality", "religion", "age", "disability")


def write_pairs(path: Path, pairs: int) -> str:
    """A CrowS-Pairs shaped CSV of ``pairs`` distinct pairs; returns its sha256."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["", "sent_more", "sent_less", "stereo_antistereo", "bias_type"])
        for row in range(pairs):
            group = BIAS_TYPES[row % len(BIAS_TYPES)]
            sentence = f"Person number {row} from group {row % 97} went to the market on day {row % 31}"
            writer.writerow([row, f"{sentence} and was rude.", f"{sentence} and was kind.", "stereo", group])
    return hashlib.sha256(path.read_bytes()).hexdigest()


def child(requests: int, chunk_size: int | None) -> dict[str, object]:
    """Materialize one partition of ``requests`` requests in this process; what it cost."""
    from dagster import DagsterEventType, DagsterInstance, materialize

    from themis_dagster.assets import evaluation_assets
    from themis_dagster.assets.factory import ROW_COUNT
    from themis_dagster.datasets import ResolvedFile
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.registry.models import DEFAULT_MODEL_ID
    from themis_dagster.resources import FakeEngineResource, ThemisConfig, WarehouseResource
    from themis_dagster.settings import Settings
    from themis_dagster.tasks.loader import LoadedTask

    workdir = Path(tempfile.mkdtemp(prefix="chain_scale_"))
    atexit.register(shutil.rmtree, workdir, True)  # the child's warehouse and CSV (about 50 MB at 10^6) go with it
    csv_path = workdir / FILE
    sha = write_pairs(csv_path, requests // 2)

    class SyntheticFiles(ThemisConfig):
        """The task's file is the synthetic one (bench only)."""

        def dataset_files(self, task: LoadedTask) -> dict[str, ResolvedFile]:
            return {FILE: ResolvedFile(TASK, FILE, csv_path, "synthetic", sha, "mirror", None)}

    settings = Settings.from_env()
    extra = {"request_chunk_size": chunk_size} if chunk_size else {}
    themis = SyntheticFiles(
        models_file=str(settings.models_file),
        datasets_dir=str(settings.datasets_dir),
        cache_dir=str(settings.cache_dir),
        models_dir=str(settings.models_dir),
        exports_dir=str(workdir / "exports"),
        reports_dir=str(workdir / "reports"),
        allow_downloads=False,
        **extra,
    )
    resources = {
        "themis": themis,
        "warehouse": WarehouseResource(database=str(workdir / "warehouse.duckdb")),
        "engine": FakeEngineResource(),
    }
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [DEFAULT_MODEL_ID])
        usage = resource.getrusage(resource.RUSAGE_SELF)
        sampler = CpuSampler()
        started = time.perf_counter()
        with sampler:
            result = materialize(
                evaluation_assets,
                partition_key=evaluation_key(DEFAULT_MODEL_ID, TASK),
                resources=resources,
                instance=instance,
            )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
        if not result.success:
            raise SystemExit("materialization failed")
        stage_seconds, stage_cpu, step_started = {}, {}, {}
        for record in instance.all_logs(result.run_id):
            event = record.dagster_event
            if event is None or event.step_key is None:
                continue
            if event.event_type == DagsterEventType.STEP_START:
                step_started[event.step_key] = record.timestamp
            elif event.event_type == DagsterEventType.STEP_SUCCESS:
                stage_seconds[event.step_key] = event.event_specific_data.duration_ms / 1000  # type: ignore[union-attr]
                stage_cpu[event.step_key] = sampler.between(step_started[event.step_key], record.timestamp)
        answered = instance.get_latest_materialization_event(evaluation_assets[2].key)
        assert answered is not None and answered.asset_materialization is not None
        metadata = {key: value.value for key, value in answered.asset_materialization.metadata.items()}
    handoff = float(metadata.get("handoff_seconds", 0.0))  # type: ignore[arg-type]
    engine = float(metadata["engine_seconds"]) - handoff  # type: ignore[arg-type]
    steps = sum(stage_seconds.get(stage, 0.0) for stage in STAGES)
    platform = steps - engine
    return {
        "requests": int(metadata[ROW_COUNT]),  # type: ignore[call-overload]
        "wall_s": round(wall, 3),
        "steps_s": round(steps, 3),
        "engine_s": round(engine, 3),
        "handoff_s": round(handoff, 3),
        "platform_s": round(platform, 3),
        "us_per_request": round(platform / requests * 1e6, 2),
        # CPU seconds of the whole run (every thread; the engine's share included): steadier than
        # wall time on a shared machine
        "cpu_s": round(cpu, 3),
        "cpu_us_per_request": round((cpu - engine) / requests * 1e6, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_mib": round(rss_before / 1024, 1),
        "stages_s": {stage: round(stage_seconds.get(stage, 0.0), 3) for stage in STAGES},
        # CPU seconds of the process while each step ran (sampled every 50 ms; raw_responses
        # includes the fake engine's time, engine_s)
        "stages_cpu_s": {stage: round(stage_cpu.get(stage, 0.0), 2) for stage in STAGES},
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuSampler:
    """The process's CPU time, sampled on a thread while a run executes: CPU seconds per step.

    On a shared machine wall times follow the load; the CPU a step used is steadier.
    """

    def __init__(self, every_s: float = 0.05) -> None:
        self.every_s = every_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append((time.time(), _cpu_seconds()))
            if self._stop.wait(self.every_s):
                self.samples.append((time.time(), _cpu_seconds()))
                return

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _at(self, when: float) -> float:
        """CPU seconds at ``when`` (epoch seconds), interpolated between samples."""
        times = [sample[0] for sample in self.samples]
        index = bisect.bisect_left(times, when)
        if index <= 0:
            return self.samples[0][1]
        if index >= len(times):
            return self.samples[-1][1]
        (t0, c0), (t1, c1) = self.samples[index - 1], self.samples[index]
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0) if t1 > t0 else c1

    def between(self, start: float, stop: float) -> float:
        return self._at(stop) - self._at(start)


def run_size(requests: int, timeout: float, chunk_size: int | None, tree: Path = ROOT) -> dict[str, object] | str:
    """One size in a fresh child process running ``tree``'s code: its figures, or why there are none."""
    command = [sys.executable, str(tree / "bench" / "chain_scale.py"), "--child", str(requests)]
    if chunk_size:
        command += ["--chunk-size", str(chunk_size)]
    env = os.environ | {"THEMIS_ENGINE": "fake", "PYTHONPATH": str(tree)}
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"did not finish within {timeout:.0f} s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return f"failed (exit {done.returncode}): {' | '.join(tail)}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-size", type=int, default=SIZES[-1], help="largest partition, in requests")
    parser.add_argument("--sizes", default="", help="comma-separated sizes (default: 10^3 .. --max-size)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one size may take")
    parser.add_argument("--chunk-size", type=int, default=None, help="request chunk size (default: the config)")
    parser.add_argument(
        "--compare",
        type=Path,
        default=None,
        help="another checkout (e.g. the branch base) also measured at each size, interleaved, with the ratio",
    )
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.chunk_size)))
        return
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [s for s in SIZES if s <= args.max_size]
    print(
        f"{'requests':>10} {'platform s':>11} {'engine s':>9} {'us/request':>11} {'cpu us/req':>11} "
        f"{'peak RSS MiB':>13}  stages (s)"
    )
    measured: list[dict[str, object]] = []
    compared: list[dict[str, object]] = []
    for size in sizes:
        figures = run_size(size, args.timeout, args.chunk_size)
        if isinstance(figures, str):
            print(f"{size:>10} {figures}")
            break
        measured.append(figures)
        _print_row(str(size), figures)
        if args.compare is not None:
            other = run_size(size, args.timeout, args.chunk_size, args.compare.resolve())
            if isinstance(other, str):
                print(f"{'compare':>10} {other}")
                continue
            _print_row("compare", other)
            time_ratio = float(figures["platform_s"]) / float(other["platform_s"])  # type: ignore[arg-type]
            cpu_ratio = float(figures["cpu_us_per_request"]) / float(other["cpu_us_per_request"])  # type: ignore[arg-type]
            rss_ratio = float(figures["peak_rss_mib"]) / float(other["peak_rss_mib"])  # type: ignore[arg-type]
            print(
                f"{'':>10} this/compare: platform time {time_ratio:.2f}, CPU {cpu_ratio:.2f}, peak RSS {rss_ratio:.2f}",
                flush=True,
            )
            compared.append({"requests": size, "this": figures, "compare": other})
    if len(measured) >= 2:
        first, last, before = measured[0], measured[-1], measured[-2]
        ratio = float(last["us_per_request"]) / float(first["us_per_request"])  # type: ignore[arg-type]
        cpu_ratio = float(last["cpu_us_per_request"]) / float(first["cpu_us_per_request"])  # type: ignore[arg-type]
        marginal = (float(last["platform_s"]) - float(before["platform_s"])) / (  # type: ignore[arg-type]
            int(last["requests"]) - int(before["requests"])  # type: ignore[call-overload]
        )
        print(
            f"ratio us/request {last['requests']} vs {first['requests']} (peer: the same platform at "
            f"{first['requests']}): {ratio:.2f} (CPU: {cpu_ratio:.2f}); "
            f"marginal us/request {before['requests']}->{last['requests']}: {marginal * 1e6:.2f}"
        )
    print("RESULTS " + json.dumps(measured))
    if compared:
        print("COMPARED " + json.dumps(compared))
    if measured:
        _write(measured, compared)


TARGET_SIZE, TARGET_US, TARGET_MIB = 1_000_000, 50.0, 2048.0


def _number(figures: object, key: str) -> float:
    assert isinstance(figures, dict)
    value = figures[key]
    assert isinstance(value, int | float)
    return float(value)


def _write(measured: list[dict[str, object]], compared: list[dict[str, object]]) -> None:
    """The result file: the largest size's figures in the summary, the ratios, the targets at 10^6."""
    last = measured[-1]
    size = int(_number(last, "requests"))
    peers: list[Peer] = []
    if len(measured) >= 2:
        first = measured[0]
        peers.append(
            peer(
                f"us/request {size:,} / {int(_number(first, 'requests')):,}",
                _number(last, "us_per_request") / _number(first, "us_per_request"),
            )
        )
    for pair in compared:
        peers.append(
            peer(
                f"platform time this / the compared checkout at {int(_number(pair, 'requests')):,}",
                _number(pair["this"], "platform_s") / _number(pair["compare"], "platform_s"),
            )
        )
    at_target = next((m for m in measured if m["requests"] == TARGET_SIZE), None)
    us = None if at_target is None else _number(at_target, "us_per_request")
    mib = None if at_target is None else _number(at_target, "peak_rss_mib")
    growth = peers[0]["ratio"] if len(measured) >= 2 and at_target is not None else None
    targets: list[Target] = [
        target(f"<= {TARGET_US:g} us/request at 10^6", None if us is None else us <= TARGET_US),
        target(f"peak RSS <= {TARGET_MIB:,.0f} MiB at 10^6", None if mib is None else mib <= TARGET_MIB),
        target("us/request does not grow with size", None if growth is None else growth <= 1.0),
    ]
    write_result(
        "chain_scale",
        {"sizes": measured, "compared": compared},
        summary=f"at {size:,} requests: {_number(last, 'us_per_request'):.1f} us/request of platform time "
        f"(CPU {_number(last, 'cpu_us_per_request'):.1f}), peak RSS {_number(last, 'peak_rss_mib'):,.0f} MiB",
        peers=peers,
        targets=targets,
    )


def _print_row(label: str, figures: dict[str, object]) -> None:
    stages = " ".join(f"{k}={v}" for k, v in figures["stages_s"].items())  # type: ignore[attr-defined]
    if "stages_cpu_s" in figures:
        stages += " | CPU s: " + " ".join(f"{k}={v}" for k, v in figures["stages_cpu_s"].items())  # type: ignore[attr-defined]
    print(
        f"{label:>10} {figures['platform_s']:>11} {figures['engine_s']:>9} {figures['us_per_request']:>11} "
        f"{figures['cpu_us_per_request']:>11} {figures['peak_rss_mib']:>13}  {stages}",
        flush=True,
    )


if __name__ == "__main__":
    main()
