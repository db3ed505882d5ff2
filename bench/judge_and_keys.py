"""Benchmark: the two levers of issue 14 item 2's last step, each against its peer in the same run.

1. The ``judgments`` stage's work for crows_pairs at N requests (N/2 pairs): the columnar
   ``judge_frame`` (``evaluation/task_frames.py``) against the record path it replaces
   (``evaluation/judging/task_judge.py::judge_by_chunks``: items, requests and responses as records
   8192 items at a time, ``judge``, judgments back to a frame). Same frames in, equal frames out
   (checked here too).
2. Writing a million-row ``prompts`` partition into a fresh DuckDB file and replacing it again (a
   re-run), with the PRIMARY KEY that warehouses were created with before and without it (now).

Wall and CPU seconds (``getrusage`` of this process: every thread) for each; ratios printed.

    .venv/bin/python bench/judge_and_keys.py [--requests 1000000]

The figures go to ``bench/results/judge_and_keys-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import polars as pl  # noqa: E402

from bench.results import peer, write_result  # noqa: E402
from themis_dagster.evaluation.judging.task_judge import judge_by_chunks  # noqa: E402
from themis_dagster.evaluation.partition import EvaluationPartition  # noqa: E402
from themis_dagster.evaluation.task_frames import columnar_judge, judged_frame  # noqa: E402
from themis_dagster.tasks.loader import load_task  # noqa: E402
from themis_dagster.warehouse.partitions import replace_partition  # noqa: E402
from themis_dagster.warehouse.schema import ensure_schema  # noqa: E402
from themis_dagster.warehouse.tables import TABLES  # noqa: E402

KEY = EvaluationPartition("bench-model", "crows_pairs")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(work: Callable[[], Any]) -> tuple[Any, float, float]:
    """``work()``'s result, wall seconds and CPU seconds."""
    wall, cpu = time.perf_counter(), _cpu()
    result = work()
    return result, time.perf_counter() - wall, _cpu() - cpu


def frames(requests: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """task_items, prompts and responses frames of a crows_pairs partition, as the stages read them."""
    pairs = requests // 2
    ids = [str(i) for i in range(pairs)]
    constant = {"model": [KEY.model] * pairs, "task": [KEY.task] * pairs}
    items = pl.DataFrame(
        {
            **constant,
            "item_id": ids,
            "subset": [("race-color", "gender", "age")[i % 3] for i in range(pairs)],
            "fields": [
                f'{{"bias_type": "x", "sent_less": "less {i}", "sent_more": "more {i}", "stereo_antistereo": '
                f'"{("stereo", "antistereo")[i % 2]}"}}'
                for i in range(pairs)
            ],
            "dataset_sha256": ["sha"] * pairs,
        },
        schema=TABLES["task_items"].frame_schema,
    )
    request_ids = [f"{i}:{side}" for i in range(pairs) for side in ("more", "less")]
    item_ids = [str(i) for i in range(pairs) for _ in range(2)]
    base = {"model": [KEY.model] * requests, "task": [KEY.task] * requests, "request_id": request_ids,
            "item_id": item_ids, "request_type": ["loglikelihood"] * requests}  # fmt: skip
    prompts = pl.DataFrame(
        base | {"context": [""] * requests, "continuation": [f"sentence {i}" for i in range(requests)]},
        schema_overrides=TABLES["prompts"].frame_schema,
    ).with_columns(
        pl.lit(None, dtype=pl.String).alias(name)
        for name in ("prompt", "messages", "template", "template_sha256", "gen_params")
    )
    responses = pl.DataFrame(
        base | {"logprob": [-10.0 - (i * 7919 % 1000) / 97 for i in range(requests)]},
        schema_overrides=TABLES["responses"].frame_schema,
    ).with_columns(
        pl.lit(False).alias("is_greedy"),
        pl.lit(None, dtype=pl.String).alias("text"),
        pl.lit(None, dtype=pl.String).alias("prompt_text"),
        pl.lit(4, dtype=pl.Int32).alias("n_prompt_tokens"),
        pl.lit(0, dtype=pl.Int32).alias("n_output_tokens"),
        pl.lit("scored").alias("finish_reason"),
        pl.lit(0.0).alias("latency_s"),
        pl.lit(None, dtype=pl.String).alias("error"),
        pl.lit(2, dtype=pl.Int32).alias("n_continuation_tokens"),
        pl.lit(None, dtype=pl.String).alias("reasoning"),
        pl.lit(None, dtype=pl.Int32).alias("n_reasoning_tokens"),
    )
    return items, prompts.select(TABLES["prompts"].column_names), responses.select(TABLES["responses"].column_names)


def judgments(requests: int) -> dict[str, float]:
    task = load_task("crows_pairs")
    columnar = columnar_judge(task)
    assert columnar is not None
    items, prompts, responses = frames(requests)
    by_records, records_wall, records_cpu = timed(lambda: judge_by_chunks(task, KEY, items, prompts, responses))
    by_columns, columns_wall, columns_cpu = timed(lambda: judged_frame(columnar, KEY, items, responses, task.params))
    assert by_columns.equals(by_records), "the columnar judgments differ from judge's"
    print(f"judgments, {requests} requests: records {records_wall:.2f} s wall / {records_cpu:.2f} s CPU; "
          f"columnar {columns_wall:.2f} s / {columns_cpu:.2f} s; ratio columnar/records: wall "
          f"{columns_wall / records_wall:.3f}, CPU {columns_cpu / records_cpu:.3f}", flush=True)  # fmt: skip
    return {
        "records_wall_s": records_wall,
        "records_cpu_s": records_cpu,
        "columnar_wall_s": columns_wall,
        "columnar_cpu_s": columns_cpu,
    }


def keys(requests: int) -> dict[str, dict[str, float]]:
    _, prompts, _ = frames(requests)
    figures: dict[bool, list[tuple[float, float]]] = {}
    for constraints in (True, False):
        with tempfile.TemporaryDirectory() as folder, duckdb.connect(f"{folder}/w.duckdb") as conn:
            ensure_schema(conn, constraints=constraints)
            figures[constraints] = [
                timed(lambda: replace_partition(conn, "prompts", prompts, KEY.model, KEY.task))[1:] for _ in range(2)
            ]
    measured = {}
    for index, label in enumerate(("first write", "re-run (replace)")):
        (kw, kc), (nw, nc) = figures[True][index], figures[False][index]
        print(f"prompts {label}, {requests} rows: PRIMARY KEY {kw:.2f} s wall / {kc:.2f} s CPU; none {nw:.2f} s / "
              f"{nc:.2f} s; ratio none/key: wall {nw / kw:.3f}, CPU {nc / kc:.3f}", flush=True)  # fmt: skip
        measured[label] = {"key_wall_s": kw, "key_cpu_s": kc, "none_wall_s": nw, "none_cpu_s": nc}
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1_000_000)
    args = parser.parse_args()
    judged = judgments(args.requests)
    written = keys(args.requests)
    first, rerun = written["first write"], written["re-run (replace)"]
    write_result(
        "judge_and_keys",
        {"requests": args.requests, "judgments": judged, "prompts_rows": written},
        summary=f"{args.requests:,} requests, CPU s: judging {judged['columnar_cpu_s']:.2f} columnar against "
        f"{judged['records_cpu_s']:.2f} by records; re-writing the rows {rerun['none_cpu_s']:.2f} without a key "
        f"against {rerun['key_cpu_s']:.2f} with the PRIMARY KEY",
        peers=[
            peer("CPU columns / records (judging)", judged["columnar_cpu_s"] / judged["records_cpu_s"]),
            peer("CPU no key / key (first write)", first["none_cpu_s"] / first["key_cpu_s"]),
            peer("CPU no key / key (re-run)", rerun["none_cpu_s"] / rerun["key_cpu_s"]),
        ],
    )


if __name__ == "__main__":
    main()
