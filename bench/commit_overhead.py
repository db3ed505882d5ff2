"""Benchmark: inference with answers committed every THEMIS_COMMIT_INTERVAL_S against one commit per chunk.

One process, one loaded engine, one partition's requests (default: `crows_pairs_prompted` at its
published size, 3,016 loglikelihoods, one chunk): after a warm-up pass, the answering path runs
the partition alternately with a 1e9 s interval (the one-batch commit, the peer) and with the
default interval, each time into an empty warehouse, so no answer is reused. Engine load and
process start are outside both figures; the prefix cache is equally warm for both.

    .venv/bin/python bench/commit_overhead.py [--task crows_pairs_prompted] [--rounds 3] [--interval 10]

Side by side, wall times on a shared 2-core host move by more than the 5% asked (rounds of the
same run have differed by 25%), so each interval run also reports the commits' own cost,
measured inside it: the wall seconds its commits held the engine's step loop
(``AnswerStats.interval_commit_seconds``), as a share of its inference time. That share is an
upper bound of the difference (the closing commit then has fewer rows to write) and does not
depend on what else the host runs.

Ends with `ratio interval / one-batch: <median of the per-round ratios>x` (target <= 1.05). The
figures go to ``bench/results/commit_overhead-<isa>.json`` (bench/results.py); the target there is the
commits' own share (<= 5%), which the side-by-side ratio cannot show on a shared host.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import peer, target, write_result  # noqa: E402
from themis_dagster.engines.vllm.engine import VLLMEngine  # noqa: E402
from themis_dagster.evaluation.answering import AnswerStats, answer_requests  # noqa: E402
from themis_dagster.registry.models import DEFAULT_MODEL_ID, get_model, load_registry  # noqa: E402
from themis_dagster.resources import ThemisConfig, WarehouseResource  # noqa: E402
from themis_dagster.settings import Settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="crows_pairs_prompted")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=float, default=10.0)
    args = parser.parse_args()
    settings = Settings.from_env()
    themis = ThemisConfig(
        models_file=str(settings.models_file),
        datasets_dir=str(settings.datasets_dir),
        cache_dir=str(settings.cache_dir),
        models_dir=str(settings.models_dir),
    )
    task = themis.task(args.task)
    files = {name: resolved.path for name, resolved in themis.dataset_files(task).items()}
    items = task.hooks.load_items(files, task.params)
    requests = task.hooks.build_requests(items, task.params, task.templates)
    spec = get_model(load_registry(settings.models_file), DEFAULT_MODEL_ID)
    engine = VLLMEngine(spec, str(themis.weights(spec).path))
    folder = Path(tempfile.mkdtemp(prefix="commit-overhead-"))

    def timed(name: str, interval: float) -> tuple[float, AnswerStats]:
        warehouse = WarehouseResource(database=str(folder / f"{name}.duckdb"))
        started = time.perf_counter()
        _, stats = answer_requests(
            requests, engine=lambda: engine, warehouse=warehouse, model_id=spec.id, model_fingerprint="bench",
            chunk_size=settings.request_chunk_size, retries=0, commit_interval_s=interval,
        )  # fmt: skip
        elapsed = time.perf_counter() - started
        assert stats.sent == len(requests) and stats.reused == 0
        return elapsed, stats

    timed("warm-up", 1e9)
    ratios, shares, rounds = [], [], []
    for number in range(1, args.rounds + 1):
        first, second = (1e9, args.interval) if number % 2 else (args.interval, 1e9)
        runs = {first: timed(f"r{number}a", first), second: timed(f"r{number}b", second)}
        (interval_s, stats), (batch_s, _) = runs[args.interval], runs[1e9]
        ratios.append(interval_s / batch_s)
        shares.append(stats.interval_commit_seconds / interval_s)
        print(
            f"round {number}: {len(requests)} requests; one-batch {batch_s:.1f} s, "
            f"every {args.interval:g} s {interval_s:.1f} s ({ratios[-1]:.3f}x); "
            f"{stats.interval_commits} commits while inferring took {stats.interval_commit_seconds:.3f} s "
            f"({100 * shares[-1]:.2f}% of the run)",
            flush=True,
        )
        rounds.append(
            {
                "one_batch_s": batch_s,
                "interval_s": interval_s,
                "commits": stats.interval_commits,
                "commit_s": stats.interval_commit_seconds,
            }
        )
    engine.shutdown()
    print(f"commits while inferring / inference: {100 * statistics.median(shares):.2f}% (median of the rounds)")
    print(f"ratio interval / one-batch: {statistics.median(ratios):.3f}x (target <= 1.05)")
    share, ratio = statistics.median(shares), statistics.median(ratios)
    write_result(
        "commit_overhead",
        {"task": args.task, "requests": len(requests), "interval_s": args.interval, "rounds": rounds},
        summary=f"{len(requests):,} requests, {args.rounds} rounds: commits made while the engine worked took "
        f"{100 * share:.2f}% of the run (median); a commit every {args.interval:g} s against one per chunk",
        peers=[peer("commit time / inference", share), peer(f"every {args.interval:g} s / one-batch", ratio)],
        targets=[target("commits within 5% (their time measured inside the run)", share <= 0.05)],
    )


if __name__ == "__main__":
    main()
