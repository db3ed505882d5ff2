"""Bench scripts write what they measured as JSON under ``bench/results/``, one file per bench and machine kind.

``docs/benchmarks.md``'s table of current figures is made from these files (``bench/figures.py``), so a
figure in the docs is always one a script printed, with the command that printed it. Each file holds the
command line, the commit, the date, the machine (CPU, instruction-set level, what ``dtype: auto`` resolved
to) and the bench's own figures.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def machine() -> dict[str, Any]:
    """The CPU this ran on, its instruction-set level (caps counted) and the cores this process may use."""
    import os

    sys.path.insert(0, str(ROOT))
    from themis_dagster.engines.precision import this_cpu

    cpu = this_cpu()
    native, why = cpu.native_bf16()
    return {
        "cpu": cpu.model_name,
        "isa": cpu.isa_tag,
        "caps": dict(cpu.caps),
        "native_bf16": native,
        "bf16_reason": why,
        "cores": len(os.sched_getaffinity(0)),
    }


def _commit() -> str:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip()


def write_result(bench: str, figures: dict[str, Any], *, argv: list[str] | None = None) -> Path:
    """``bench/results/<bench>-<isa>.json`` with the figures, the command, the commit, the date and the machine."""
    where = machine()
    import os

    simulated = os.environ.get("THEMIS_CPU_ISA")  # bench/cpu_isa/sitecustomize.py: an AVX2-only CPU simulated
    prefix = f"THEMIS_CPU_ISA={simulated} PYTHONPATH=bench/cpu_isa " if simulated else ""
    payload = {
        "bench": bench,
        "command": prefix + shlex.join([".venv/bin/python", *(argv if argv is not None else sys.argv)]),
        "commit": _commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": where,
        "figures": figures,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{bench}-{where['isa']}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    print(f"results written to {path.relative_to(ROOT)}", flush=True)
    return path
