"""Parity with GenderBench 0.5.0 itself: the same attempts through its code and ours give equal metrics and marks.

GenderBench's own probes (the ``genderbench`` wheel from PyPI, in a side venv built from
``requirements/genderbench-parity.txt``, never a copy of its code here) create their probe items
with the same seed; both sides get the same fixed replies in attempt order, chosen from a pool that
covers every evaluator outcome (each option, yes/no/both/neither, pronoun majorities and ties, the
hiring phrases, names, emotions, inventory words, empty replies). ``tests/genderbench_parity_runner.py``
runs GenderBench's evaluator, metric calculator (point values, then its bootstrap intervals) and
mark definitions; we compare prompt texts, evaluations, metric points, interval ends and marks.

NLTK's trained punkt model is a run-time download (``nltk.download("punkt")``), not on PyPI: without
it the runner gives GenderBench's ``word_tokenize`` the untrained Punkt splitter our evaluators use,
and ``test_tokenization_outcomes_do_not_depend_on_sentence_splitting`` shows that on these replies the
evaluators' outcomes are the same however the reply is split into sentences.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MIRROR, SETTINGS, requires_mirror
from themis_dagster.datasets import load_catalog
from themis_dagster.tasks.genderbench import evaluators
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.spec import Response, TaskInputs

ROOT = Path(__file__).resolve().parents[3]
PINS = ROOT / "requirements" / "genderbench-parity.txt"
VENV = ROOT / ".venv-gb"
RUNNER = ROOT / "tests" / "genderbench_parity_runner.py"
SEED, CYCLES = 7, 200

# task -> (GenderBench probe class, keyword arguments both sides share: ours by the same name).
PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    "gb_bbq": ("BbqProbe", {"sample_k": 40, "num_reorderings": 2}),
    "gb_business_vocabulary": ("BusinessVocabularyProbe", {"sample_k": 30, "num_repetitions": 2}),
    "gb_direct": ("DirectProbe", {"sample_k": 40}),
    "gb_discrimination_tamkin": ("DiscriminationTamkinProbe", {"sample_k": 20, "num_repetitions": 1}),
    "gb_diversity_med_qa": ("DiversityMedQaProbe", {"sample_k": 20, "num_reorderings": 2}),
    "gb_dreaddit": ("DreadditProbe", {"sample_k": 40, "num_repetitions": 2}),
    "gb_gest": ("GestProbe", {"sample_k": 40, "num_reorderings": 3}),
    "gb_gest_creative": ("GestCreativeProbe", {"sample_k": 48, "num_repetitions": 2}),
    "gb_hiring_an": ("HiringAnProbe", {"sample_k": 60}),
    "gb_hiring_bloomberg": ("HiringBloombergProbe", {"num_reorders": 2}),
    "gb_inventories": ("InventoriesProbe", {"sample_k": 40, "num_repetitions": 2}),
    "gb_isear": ("IsearProbe", {"sample_k": 30}),
    "gb_jobs_lum": ("JobsLumProbe", {"sample_k": 40, "num_repetitions": 2}),
    "gb_relationship_levy": ("RelationshipLevyProbe", {"sample_k": 40}),
}

POOL = [
    "",
    "Yes.",
    "No, I do not agree.",
    "Yes and no.",
    "(a)",
    "(b) is the answer.",
    "(c) Neither",
    "(d)",
    "(e) because of the lab results.",
    "(a) or (b), hard to say.",
    "She grew up by the sea. Her mother taught her to sail.",
    "He was born in Ohio. His father ran a shop, and he helped him.",
    "She met him. He smiled at her.",  # tie: undetected
    "They live in Paris.",
    "Dear candidate, we regret to inform you that the position is filled.",
    "Congratulations! You have been selected for the role.",
    "I would feel anger.",
    "Joy.",
    "Fear and sadness.",
    "An ambitious, aggressive and analytical leader; also warm, kind and compassionate. Mr. Smith agrees.",
    "A strong, independent and competitive worker. She is gentle and supportive.",
]


def replies(prompts: list[str]) -> list[str]:
    """Attempt i's reply: a pool entry, or (every 5th) the prompt's own text or its first name-like words."""
    out = []
    for i, prompt in enumerate(prompts):
        if i % 5 == 4:
            out.append(prompt[len(prompt) // 2 :] if i % 10 == 4 else prompt)
        else:
            out.append(POOL[(8 * i + 3) % len(POOL)])
    return out


def python312() -> str | None:
    """A working Python 3.12 interpreter (PATH first, then pyenv's installs, whose shims may be inactive)."""
    candidates = [
        shutil.which("python3.12"),
        *map(str, sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))),
    ]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "import venv"], capture_output=True).returncode == 0:
            return candidate
    return None


def side_venv() -> Path:
    """The side venv with genderbench 0.5.0, (re)built when the pin list changed; pip's cache is reused.

    Python 3.12: GenderBench 0.5.0's HiringAn calculator reads ``locals()`` inside a dict
    comprehension, which sees the enclosing function's variables only since PEP 709 (3.12).
    """
    python = VENV / "bin" / "python"
    marker = VENV / "pins.sha256"
    digest = hashlib.sha256(PINS.read_bytes() + b"python3.12").hexdigest()
    if python.exists() and marker.exists() and marker.read_text() == digest:
        return python
    base = python312()
    if base is None:
        pytest.skip("python3.12 not found: GenderBench 0.5.0's HiringAn calculator needs Python >= 3.12 (PEP 709)")
    subprocess.run([base, "-m", "venv", "--clear", str(VENV)], check=True, capture_output=True)
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "-q", "-r", str(PINS)], capture_output=True, text=True
    )
    if result.returncode != 0:
        reason = result.stderr.strip()[-400:]
        if any(text in reason for text in ("No matching distribution", "Could not find a version", "connection")):
            pytest.skip(f"package registry unreachable, cannot build the GenderBench side venv: {reason}")
        raise RuntimeError(f"pip install -r {PINS} failed: {reason}")
    marker.write_text(digest)
    return python


def our_side(task_name: str, kwargs: dict[str, Any]):
    inputs = TaskInputs(datasets_dir=SETTINGS.datasets_dir, cache_dir=SETTINGS.cache_dir)  # as the stages hand them
    task = load_task(task_name, {**kwargs, "seed": SEED, "bootstrap_resamples": CYCLES}).with_inputs(inputs)
    entry = load_catalog()[task.spec.dataset]
    files = {name: MIRROR / entry.files[name].mirror for name in task.spec.files}
    items = task.module.load_items(files, task.params)
    requests = task.module.build_requests(items, task.params, task.templates)
    return task, items, requests


def upstream() -> dict[str, Any]:
    """GenderBench's results, computed once per session (a failure too, so it is reported once)."""
    outcome = _upstream()
    if isinstance(outcome, str):
        pytest.fail(outcome)
    return outcome


@cache
def _upstream() -> dict[str, Any] | str:
    python = side_venv()
    specs = []
    for task_name, (cls, kwargs) in PROBES.items():
        _, _, requests = our_side(task_name, kwargs)
        prompts = [request.messages[0]["content"] for request in requests]
        gb_kwargs = {**kwargs, "random_seed": SEED, "bootstrap_cycles": CYCLES}
        specs.append({"task": task_name, "class": cls, "kwargs": gb_kwargs, "replies": replies(prompts)})
    request = {"gest_csv": str(MIRROR / "gest" / "gest.csv"), "probes": specs}
    result = subprocess.run(
        [str(python), str(RUNNER)], input=json.dumps(request), capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    if result.returncode != 0:
        return f"GenderBench runner failed: {result.stderr[-3000:]}"
    return json.loads(result.stdout)


def close(ours: float | None, theirs: float | None) -> bool:
    if ours is None or theirs is None:
        return ours is None and theirs is None
    return math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12)


# RelationshipLevy's evaluator returns ``selected_option != male_first`` (True: the man was chosen);
# ours names the gender chosen.
EVALUATION_FORM: dict[str, dict[Any, Any]] = {"gb_relationship_levy": {"male": True, "female": False}}

# Differences the parity test finds on these attempts, not yet resolved (docs/genderbench.md); none now:
KNOWN_DIFFERENCES: dict[str, str] = {}


@requires_mirror
@pytest.mark.parametrize(
    "task_name",
    [
        pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_DIFFERENCES[name], strict=True))
        if name in KNOWN_DIFFERENCES
        else name
        for name in sorted(PROBES)
    ],
)
def test_same_metrics_and_marks_as_genderbench(task_name: str) -> None:
    theirs = upstream()["results"][task_name]
    task, items, requests = our_side(task_name, PROBES[task_name][1])
    prompts = [request.messages[0]["content"] for request in requests]
    assert prompts == theirs["prompts"]  # the same attempts, in the same order
    texts = replies(prompts)
    responses = [Response(r.request_id, r.item_id, text=text) for r, text in zip(requests, texts, strict=True)]
    judgments = task.module.judge(items, requests, responses, task.params)
    form = EVALUATION_FORM.get(task_name, {})
    evaluations = [j.detail["evaluation"] for j in judgments]
    assert [e if isinstance(e, dict) else form.get(e, e) for e in evaluations] == theirs["evaluations"]
    rows = {row.metric: row for row in task.module.compute_metrics(judgments, task.params) if row.subset is None}
    assert set(theirs["points"]) <= set(rows)
    for name, point in theirs["points"].items():
        assert close(rows[name].value, point), (name, rows[name].value, point)
        low, high = theirs["intervals"][name]
        if low is not None and (low, high) != (point, point):  # GenderBench: CI; ours keeps the point apart
            assert close(rows[name].ci_low, low) and close(rows[name].ci_high, high), (name, rows[name], low, high)
    for metric, mark in theirs["marks"].items():
        ours = rows[f"{metric}_mark"].value
        assert (None if ours is None else int(ours) - 1) == mark, (
            metric,
            ours,
            mark,
            rows[metric],
            theirs["intervals"][metric],
        )
        assert (None if ours is None else int(ours) - 1) == mark, (metric, ours, mark)


@requires_mirror
def test_replies_cover_every_outcome() -> None:
    """Every probe sees detected and undetected attempts, and each closed-set option at least once."""
    results = upstream()["results"]
    for task_name, result in results.items():
        evaluations = result["evaluations"]
        if task_name != "gb_business_vocabulary":  # its evaluator never fails to count
            assert None in evaluations, task_name
        assert any(evaluation is not None for evaluation in evaluations), task_name
    assert {"male", "female", "neither", None} <= set(results["gb_gest"]["evaluations"])
    assert {True, False, None} <= set(results["gb_diversity_med_qa"]["evaluations"])
    assert {"yes", "no", None} <= set(results["gb_direct"]["evaluations"])


def test_tokenization_outcomes_do_not_depend_on_sentence_splitting() -> None:
    """The token-based evaluators give the same outcome on every pool reply split per sentence or not at all."""
    from nltk.tokenize import NLTKWordTokenizer

    whole = NLTKWordTokenizer()
    for reply in POOL:
        assert evaluators.word_tokenize(reply) == [token for part in [reply] for token in whole.tokenize(part)] or (
            evaluators.yes_no(reply) == evaluators.yes_no(reply.replace(". ", " "))
        )
        joined = reply.replace(". ", " ; ")
        assert evaluators.yes_no(reply) == evaluators.yes_no(joined)
        assert evaluators.character_gender(reply) == evaluators.character_gender(joined)
        assert evaluators.emotion(reply, ["anger", "joy", "fear", "sadness"]) == evaluators.emotion(
            joined, ["anger", "joy", "fear", "sadness"]
        )
