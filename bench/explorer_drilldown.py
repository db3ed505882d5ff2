"""Benchmark: the explorer's drill-down on a partition of 10^6 judgments (2 x 10^6 prompts and replies).

Builds a synthetic warehouse with the project's own schema (``ensure_schema``): one partition
of ``--items`` judgments, each covering two loglikelihood requests (as CrowS-Pairs does), in
eight subsets and three outcomes, plus a small second partition; then times, each the best of
``--rounds``, what the drill-down page runs through the read-only door: opening the
connection, the filter choices, and one page (count + ``LIMIT/OFFSET`` + the page's prompts
and replies) at the first page, in the middle and at the end, filtered by subset, by outcome
and by a ``template=`` slice.

    .venv/bin/python bench/explorer_drilldown.py [--items 1000000] [--rounds 3] [--keep PATH]

No peer: the steps are compared with each other. The figures go to
``bench/results/explorer_drilldown-<isa>.json`` (bench/results.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import write_result  # noqa: E402
from themis_dagster.explorer import data  # noqa: E402
from themis_dagster.warehouse.schema import ensure_schema  # noqa: E402

MODEL, TASK = "synthetic-model", "synthetic_task"
SUBSETS = ("age", "gender", "race", "race/racism", "religion", "disability", "nationality", "socioeconomic")


class _Connection:
    """Binds to each statement only the ``$names`` it uses (DuckDB refuses parameters a statement lacks)."""

    def __init__(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: dict[str, object] | None = None) -> None:
        self.conn.execute(sql, {k: v for k, v in (params or {}).items() if f"${k}" in sql})


def build_synthetic(path: Path, items: int, model: str = MODEL, task: str = TASK) -> None:
    """``items`` judgments of (model, task), two prompts and two replies each, in the project's tables."""
    with duckdb.connect(str(path)) as raw:
        ensure_schema(raw)
        conn = _Connection(raw)
        params = {"model": model, "task": task, "n": items, "subsets": list(SUBSETS)}
        conn.execute(
            "INSERT INTO judgments (model, task, item_id, subset, outcome, score, parsed, detail) "
            "SELECT $model, $task, printf('item-%08d', i), $subsets[1 + i % 8], "
            "CASE i % 3 WHEN 0 THEN 'prefers_sent_more' WHEN 1 THEN 'prefers_sent_less' ELSE 'unparsed' END, "
            "CASE i % 3 WHEN 0 THEN 1.0 WHEN 1 THEN 0.0 END, i % 3 <> 2, '{}' FROM range($n) t(i)",
            params,
        )
        for side in ("more", "less"):
            side_params = params | {"side": side}
            conn.execute(
                "INSERT INTO prompts (model, task, request_id, item_id, request_type, context, continuation, template) "
                "SELECT $model, $task, printf('item-%08d:%s', i, $side), printf('item-%08d', i), 'loglikelihood', '', "
                "printf('Sentence %d, the %s stereotypical one, long enough to look like a CrowS-Pairs sentence.', "
                "i, $side), CASE WHEN i % 2 = 0 THEN 'kara' ELSE 'tsap' END FROM range($n) t(i)",
                side_params,
            )
            conn.execute(
                "INSERT INTO responses (model, task, request_id, item_id, request_type, logprob, is_greedy, "
                "n_prompt_tokens, n_output_tokens, finish_reason, n_continuation_tokens) "
                "SELECT $model, $task, printf('item-%08d:%s', i, $side), printf('item-%08d', i), 'loglikelihood', "
                "-20.0 - (i % 97) / 7.0, false, 18, 0, 'scored', 17 FROM range($n) t(i)",
                side_params,
            )
        conn.execute(
            "INSERT INTO metric_values (model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, "
            "run_id) VALUES ($model, $task, NULL, 'pct_stereotype', 0.5, 0.49, 0.51, $n, now(), 'r'), "
            "($model, $task, 'race', 'pct_stereotype', 0.5, 0.49, 0.51, $n, now(), 'r')",
            params,
        )
        conn.execute("CHECKPOINT")


def best_of(rounds: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(path: Path, items: int, rounds: int = 3) -> dict[str, float]:
    """Seconds (best of ``rounds``) of each step the drill-down page runs, on a fresh connection each time."""

    def page(where: data.Slice, offset: int = 0, **filters: object) -> Callable[[], object]:
        def run() -> object:
            with data.read_only(path) as conn:
                result = data.drilldown_page(conn, MODEL, TASK, where, offset=offset, limit=25, **filters)  # type: ignore[arg-type]
                assert result.items and all(len(item.requests) == 2 for item in result.items), result
                return result

        return run

    def choices() -> object:
        with data.read_only(path) as conn:
            return data.drilldown_choices(conn, MODEL, TASK, data.Slice())

    def connect() -> object:
        with data.read_only(path) as conn:
            return conn.execute("SELECT 1").fetchone()

    return {
        "open connection": best_of(rounds, connect),
        "filter choices (subsets, outcomes)": best_of(rounds, choices),
        "page 1 (headline: every judgment)": best_of(rounds, page(data.Slice())),
        "page in the middle": best_of(rounds, page(data.Slice(), offset=items // 2)),
        "last page": best_of(rounds, page(data.Slice(), offset=items - 25)),
        "subset 'race' (and race/racism)": best_of(rounds, page(data.Slice(subset="race"))),
        "outcome filter": best_of(rounds, page(data.Slice(), outcome="prefers_sent_less")),
        "template=kara slice": best_of(rounds, page(data.Slice(template="kara"))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the warehouse here")
    args = parser.parse_args()
    built: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        path = args.keep or Path(scratch) / "synthetic.duckdb"
        if not path.exists():
            started = time.perf_counter()
            build_synthetic(path, args.items)
            build_synthetic(path, 1000, model="other-model")
            built = {"build_s": round(time.perf_counter() - started, 1), "size_mib": round(path.stat().st_size / 2**20)}
            print(
                f"built {args.items:,} judgments, {2 * args.items:,} prompts and replies "
                f"in {built['build_s']:.1f} s ({built['size_mib']:.0f} MiB)"
            )
        steps = measure(path, args.items, args.rounds)
        for step, seconds in steps.items():
            print(f"{step:40s} {seconds * 1000:8.0f} ms")
    ms = {step: round(seconds * 1000, 1) for step, seconds in steps.items()}
    slowest = max(ms, key=ms.__getitem__)
    write_result(
        "explorer_drilldown",
        {
            "items": args.items,
            "rounds": args.rounds,
            "steps_ms": ms,
            **built,
        },
        summary=f"{args.items:,} judgments, best of {args.rounds}: page 1 "
        f"{ms['page 1 (headline: every judgment)']:.0f} ms, last page {ms['last page']:.0f} ms; "
        f"slowest step: {slowest}, {ms[slowest]:.0f} ms",
    )


if __name__ == "__main__":
    main()
