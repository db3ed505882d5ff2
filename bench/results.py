"""Bench scripts write what they measured as JSON under ``bench/results/``, one file per bench and machine kind.

``docs/benchmarks.md``'s table of current figures is made from these files (``bench/figures.py``), so a
figure in the docs is always one a script printed, with the command that printed it. A file holds:

- ``bench`` (the script's name), ``case`` (which of the script's cases, e.g. the task of
  ``prefix_reuse.py``; null where a script has one) and ``summary`` (one line: what it measured);
- ``peers``: each ``{"ratio_of": "lm-eval vLLM / ours", "ratio": 1.86}``, the ratio against what the
  script timed beside ours in the same run (empty where the script compares nothing);
- ``targets``: each ``{"goal": "lm-eval vLLM / ours >= 1.5x", "met": true}`` (``met`` null where this
  run does not decide it, e.g. a target at 10^6 requests in a run of 10^5);
- ``figures``: the script's own figures, as it printed them;
- ``command`` (runnable from the repository root: no machine paths), ``commit`` (``+dirty`` when the
  code differed from it), ``date``, ``elapsed_s`` (the whole script) and ``machine`` (CPU,
  instruction-set level with caps counted, cores, load average at the start and the end).

The file is ``<bench>-<isa>.json`` (``<bench>.<case>-<isa>.json`` for a case), where ``<isa>`` is the
machine kind: ``x86_64-avx512bf16`` on a CPU with native bf16, ``x86_64-avx2`` on an AVX2-only one or
on the simulated AVX2 path (``THEMIS_CPU_ISA=avx2 PYTHONPATH=bench/cpu_isa``, kept in the command).
``THEMIS_BENCH_RESULTS`` names another folder; a script a test runs (``PYTEST_CURRENT_TEST`` set)
writes nothing unless that variable is set, so a test never replaces a committed figure.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
FOLDER_VARIABLE = "THEMIS_BENCH_RESULTS"
# the default dataset mirror (settings.py): a path under it is written the way a fresh clone reaches it
MIRROR = ROOT.parent / "shared" / "datasets"
_STARTED = time.perf_counter()
_LOAD_AT_START = os.getloadavg()


class Peer(TypedDict):
    """A ratio against what the script measured beside ours in the same run; ``ratio_of`` says what over what."""

    ratio_of: str
    ratio: float


class Target(TypedDict):
    """A target the script checks; ``met`` is None where this run does not decide it."""

    goal: str
    met: bool | None


def peer(ratio_of: str, ratio: float) -> Peer:
    return {"ratio_of": ratio_of, "ratio": float(ratio)}


def target(goal: str, met: bool | None) -> Target:
    return {"goal": goal, "met": met}


# every field of a result file and its type(s); checked by problems() here and by bench/figures.py
FIELDS: dict[str, tuple[type, ...]] = {
    "bench": (str,),
    "case": (str, type(None)),
    "summary": (str,),
    "peers": (list,),
    "targets": (list,),
    "figures": (dict,),
    "command": (str,),
    "commit": (str,),
    "date": (str,),
    "elapsed_s": (int, float),
    "machine": (dict,),
}


def file_name(bench: str, case: str | None, isa: str) -> str:
    return f"{bench}{f'.{case}' if case else ''}-{isa}.json"


def problems(payload: Any) -> list[str]:
    """What is wrong with a result file's content, each naming the field (empty: nothing)."""
    if not isinstance(payload, dict):
        return ["not a JSON object"]
    found = [f"missing field '{name}'" for name in FIELDS if name not in payload]
    found += [
        f"field '{name}' is {type(payload[name]).__name__}, not {' or '.join(kind.__name__ for kind in kinds)}"
        for name, kinds in FIELDS.items()
        if name in payload and not isinstance(payload[name], kinds)
    ]
    found += [f"unknown field '{name}'" for name in sorted(set(payload) - set(FIELDS))]
    if found:
        return found
    if not payload["summary"].strip() or "\n" in payload["summary"]:
        found.append("field 'summary' must be one non-empty line")
    for index, entry in enumerate(payload["peers"]):
        if not (
            isinstance(entry, dict)
            and set(entry) == {"ratio_of", "ratio"}
            and isinstance(entry["ratio_of"], str)
            and isinstance(entry["ratio"], int | float)
        ):
            found.append(f"field 'peers' entry {index} is not {{'ratio_of': text, 'ratio': number}}")
    for index, entry in enumerate(payload["targets"]):
        if not (
            isinstance(entry, dict)
            and set(entry) == {"goal", "met"}
            and isinstance(entry["goal"], str)
            and entry["met"] in (True, False, None)
        ):
            found.append(f"field 'targets' entry {index} is not {{'goal': text, 'met': true, false or null}}")
    if not isinstance(payload["machine"].get("isa"), str):
        found.append("field 'machine' has no 'isa'")
    absolute = [word for word in shlex.split(payload["command"]) if word.startswith(("/", "~"))]
    if absolute:
        found.append(f"field 'command' names machine paths: {', '.join(absolute)}")
    return found


def machine() -> dict[str, Any]:
    """The CPU this ran on, its instruction-set level (caps counted) and the cores this process may use."""
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
        "load_average": {"start": [round(x, 2) for x in _LOAD_AT_START], "end": [round(x, 2) for x in os.getloadavg()]},
    }


def _git(*args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def _commit() -> str:
    """HEAD, with ``+dirty`` when the code differs from it (results and docs left out: they do not change a figure)."""
    head = _git("rev-parse", "--short=12", "HEAD")
    if head is None or head.returncode != 0:
        return "unknown"
    diff = _git("diff", "--quiet", "HEAD", "--", ".", ":(exclude)bench/results", ":(exclude)docs")
    return head.stdout.strip() + ("+dirty" if diff is None or diff.returncode != 0 else "")


def _shown(word: str) -> str:
    """A command-line word as anyone can type it: no path of this machine."""
    if not word.startswith("/"):
        return word
    path = Path(word).resolve()
    for base, shown in ((ROOT, ""), (MIRROR.resolve(), "../shared/datasets/")):
        if path.is_relative_to(base):
            rest = path.relative_to(base).as_posix()
            return (shown + rest) if rest != "." else (shown.rstrip("/") or ".")
    return "DIR" if path.is_dir() else "FILE" if path.is_file() else "PATH"


def _collapsed(words: list[str]) -> list[str]:
    """Runs of files that are every ``*<suffix>`` file of their folder become that glob (the shell gave them)."""
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        path = Path(word)
        if path.is_file() and path.suffix:
            pattern = str(path.parent / f"*{path.suffix}")
            matches = glob.glob(pattern)
            if len(matches) > 1 and set(words[index : index + len(matches)]) == set(matches):
                out.append(pattern)
                index += len(matches)
                continue
        out.append(word)
        index += 1
    return out


def command_line(argv: Sequence[str]) -> str:
    """The command as run from the repository root: ``.venv/bin/python bench/<script>.py ...``."""
    simulated = os.environ.get("THEMIS_CPU_ISA")  # bench/cpu_isa/sitecustomize.py: an AVX2-only CPU simulated
    prefix = f"THEMIS_CPU_ISA={simulated} PYTHONPATH=bench/cpu_isa " if simulated else ""
    script, *rest = argv
    words = [_shown(str(Path(script).resolve())), *(_shown(word) for word in _collapsed(list(rest)))]
    return prefix + " ".join(word if "*" in word else shlex.quote(word) for word in [".venv/bin/python", *words])


def write_result(
    bench: str,
    figures: dict[str, Any],
    *,
    summary: str,
    peers: Sequence[Peer] = (),
    targets: Sequence[Target] = (),
    case: str | None = None,
    argv: list[str] | None = None,
) -> Path | None:
    """Write ``bench/results/<bench>-<isa>.json``: summary, peers, targets, figures, command, commit, date, machine."""
    where = machine()
    payload = {
        "bench": bench,
        "case": case,
        "summary": summary,
        "peers": list(peers),
        "targets": list(targets),
        "figures": figures,
        "command": command_line(argv if argv is not None else sys.argv),
        "commit": _commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "elapsed_s": round(time.perf_counter() - _STARTED, 1),
        "machine": where,
    }
    payload = json.loads(json.dumps(payload, default=str))  # what the file will hold, checked as it will be read
    wrong = problems(payload)
    if wrong:
        raise ValueError(f"result of {bench}: {'; '.join(wrong)}")
    folder = os.environ.get(FOLDER_VARIABLE)
    if folder is None and "PYTEST_CURRENT_TEST" in os.environ:
        print(f"result not written (run by a test; set {FOLDER_VARIABLE} to write it)", flush=True)
        return None
    results = Path(folder) if folder else RESULTS
    results.mkdir(parents=True, exist_ok=True)
    path = results / file_name(bench, case, where["isa"])
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(f"results written to {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}", flush=True)
    return path
