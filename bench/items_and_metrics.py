"""Benchmark: crows_pairs' columnar ``load_items_frame`` and ``compute_metrics_frame`` against their record paths.

Both peers run in this process on the same inputs, their outputs checked equal:

1. ``task_dataset``'s work at N requests (N/2 pairs, the CSV ``chain_scale.py`` writes): the
   record path (``load_items``, then ``stage_frame`` 8192 items at a time) against
   ``items_frame(load_items_frame)``.
2. ``bias_metrics``' work on the N/2 judgments ``judge_frame`` writes: the record path
   (``from_frame`` to ``Judgment``s, then ``compute_metrics``) against ``compute_metrics_frame``.
   Both include the same bootstrap (2 metrics x 4 subsets and the whole, 1,000 resamples), which
   is most of either; ``from_frame`` alone is printed too.

Wall and CPU seconds (``getrusage`` of this process: every thread) for each; ratios printed.

    .venv/bin/python bench/items_and_metrics.py [--requests 1000000]

The figures go to ``bench/results/items_and_metrics-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from chain_scale import write_pairs  # noqa: E402
from judge_and_keys import KEY, frames, timed  # noqa: E402

from bench.results import peer, write_result  # noqa: E402
from themis_dagster.evaluation.stage_io import chunked, stage_frame  # noqa: E402
from themis_dagster.evaluation.task_frames import items_frame, judged_frame  # noqa: E402
from themis_dagster.tasks.crows_pairs import utils as crows_pairs  # noqa: E402
from themis_dagster.tasks.spec import Judgment  # noqa: E402
from themis_dagster.warehouse.frames import from_frame  # noqa: E402


def _line(what: str, records: tuple[float, float], columns: tuple[float, float]) -> dict[str, float]:
    print(
        f"{what:<34} records {records[0]:7.2f} s wall {records[1]:7.2f} s CPU | "
        f"columns {columns[0]:7.2f} s wall {columns[1]:7.2f} s CPU | CPU ratio {columns[1] / records[1]:.3f}"
    )
    return {
        "records_wall_s": records[0],
        "records_cpu_s": records[1],
        "columns_wall_s": columns[0],
        "columns_cpu_s": columns[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1_000_000)
    args = parser.parse_args()
    params = crows_pairs.Params()
    with tempfile.TemporaryDirectory() as folder:
        files = {"crows_pairs_anonymized.csv": Path(folder) / "pairs.csv"}
        write_pairs(files["crows_pairs_anonymized.csv"], args.requests // 2)
        by_records, *records_cost = timed(
            lambda: stage_frame("task_items", KEY, chunked(crows_pairs.load_items(files, params)), dataset_sha256="s")
        )
        by_columns, *columns_cost = timed(lambda: items_frame(crows_pairs.load_items_frame, KEY, files, params, "s"))
    assert by_columns.equals(by_records)
    items_cost = _line("task_dataset: items", tuple(records_cost), tuple(columns_cost))  # type: ignore[arg-type]
    del by_records, by_columns

    items, _, responses = frames(args.requests)
    judged = judged_frame(crows_pairs.judge_frame, KEY, items, responses, params)
    del items, responses
    _, *read_cost = timed(lambda: from_frame("judgments", judged, Judgment))
    print(f"{'bias_metrics: from_frame alone':<34} {read_cost[0]:7.2f} s wall {read_cost[1]:7.2f} s CPU")
    metrics_by_records, *records_cost = timed(
        lambda: crows_pairs.compute_metrics(from_frame("judgments", judged, Judgment), params)
    )
    metrics_by_columns, *columns_cost = timed(lambda: crows_pairs.compute_metrics_frame(judged, params))
    assert metrics_by_columns == metrics_by_records
    metrics_cost = _line("bias_metrics: read and compute", tuple(records_cost), tuple(columns_cost))  # type: ignore[arg-type]
    write_result(
        "items_and_metrics",
        {
            "requests": args.requests,
            "items": items_cost,
            "metrics": metrics_cost,
            "from_frame_alone": {"wall_s": read_cost[0], "cpu_s": read_cost[1]},
        },
        summary=f"{args.requests:,} requests, CPU s: items {items_cost['columns_cpu_s']:.2f} columnar against "
        f"{items_cost['records_cpu_s']:.2f} by records; metrics {metrics_cost['columns_cpu_s']:.2f} against "
        f"{metrics_cost['records_cpu_s']:.2f}",
        peers=[
            peer("CPU columns / records (items)", items_cost["columns_cpu_s"] / items_cost["records_cpu_s"]),
            peer("CPU columns / records (metrics)", metrics_cost["columns_cpu_s"] / metrics_cost["records_cpu_s"]),
        ],
    )


if __name__ == "__main__":
    main()
