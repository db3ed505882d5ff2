"""Runs GenderBench 0.5.0's own probes on fixed replies; executed in the side venv, never imported by the suite.

Reads JSON on stdin: ``{"gest_csv": path, "probes": [{"task", "class", "kwargs", "replies"}]}``; for each
probe, GenderBench creates its probe items (its own prompts and metadata, from its packaged resources),
every attempt gets ``replies[i]`` in GenderBench's attempt order, and GenderBench's evaluator,
metric calculator (points, then bootstrap intervals) and mark definitions run. Writes JSON on stdout.
Only ``anthropic``/``openai`` (API clients imported by ``genderbench.generators``, unused here) are
stubbed; NLTK's trained punkt model is used when its data is installed, otherwise the untrained
Punkt sentence splitter our evaluators use (reported as ``punkt``).
"""

from __future__ import annotations

import json
import math
import sys
import types


def stub_api_clients() -> None:
    for name in ("anthropic", "openai"):
        module = types.ModuleType(name)
        module.__getattr__ = lambda attr: type(attr, (), {})  # type: ignore[method-assign]
        sys.modules[name] = module


def tokenizer_data() -> str:
    import nltk
    import nltk.tokenize
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    nltk.download = lambda *args, **kwargs: False  # no network: never try to fetch punkt
    try:
        nltk.data.find("tokenizers/punkt/english.pickle")
        return "trained"
    except LookupError:
        splitter = PunktSentenceTokenizer()
        nltk.tokenize.sent_tokenize = lambda text, language="english": splitter.tokenize(text)
        return "untrained"


def clean(value):  # NaN -> None, tuples -> lists, numpy -> python
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return clean(value.tolist())
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def run_probe(spec: dict, gest_csv: str) -> dict:
    import genderbench.probes as probes
    import pandas as pd
    from genderbench.probing.probe import status

    read_csv = pd.read_csv
    pd.read_csv = lambda path, *a, **k: read_csv(
        gest_csv if str(path).startswith("hf://datasets/kinit/gest") else path, *a, **k
    )
    probe = getattr(probes, spec["class"])(log_strategy="no", **spec["kwargs"])
    probe.create_probe_items()
    attempts = list(probe.attempts)
    replies = spec["replies"]
    assert len(replies) == len(attempts), (spec["class"], len(replies), len(attempts))
    for attempt, reply in zip(attempts, replies, strict=True):
        attempt.answer = reply
    probe.status = status.GENERATED
    probe.evaluate()
    points = probe.metric_calculator(probe.probe_items)
    probe.calculate_metrics()  # calculate_cis=True: intervals, then the marks
    return {
        "prompts": [attempt.prompt.text for attempt in attempts],
        "evaluations": [clean(attempt.evaluation) for attempt in attempts],
        "points": clean(points),
        "intervals": clean(probe.metrics),
        "marks": {name: clean(mark["mark_value"]) for name, mark in probe.marks.items()},
    }


def main() -> None:
    request = json.load(sys.stdin)
    stub_api_clients()
    punkt = tokenizer_data()
    results = {spec["task"]: run_probe(spec, request["gest_csv"]) for spec in request["probes"]}
    json.dump({"punkt": punkt, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
