"""StereoSet's official scorer's inputs, written from stored judgments: a gold file and a predictions file.

``code/evaluation.py`` (moinnadeem/StereoSet, c860b58) reads a gold file in ``dev.json``'s shape and a
predictions file ``{"intrasentence": [{"id", "score"}], "intersentence": [...]}`` with one score per
sentence. This writes both from the rows ``themis sql`` gives (docs/stereoset-winobias.md, "Checked
against the official code"): each judgment's ``detail`` (kind, target, bias type and the scores of a
reading) beside its item's ``fields`` (context and the three sentences). A sentence's id is
``<item_id>:<label>``; each sentence carries its gold label as its one annotation. The predictions
file is named ``predictions_<name>_<reading>.json``: evaluation.py files its results under the second
``_``-separated part of the name.

    python -m themis_dagster.tasks.stereoset.official judgments.csv out/ [--reading official|summed]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from themis_dagster.tasks.stereoset.data import KINDS
from themis_dagster.tasks.stereoset.utils import CHOICES

# reading -> the detail key of a candidate's score (by request suffix)
SCORE_KEYS = {"official": "score_{}", "summed": "ll_{}"}
REQUIRED = ("item_id", "detail", "fields")


def _mapping(value: Any) -> dict[str, Any]:
    return dict(json.loads(value) if isinstance(value, str) else value)


Document = dict[str, Any]


def official_inputs(rows: Iterable[Mapping[str, Any]], reading: str = "official") -> tuple[Document, Document]:
    """(gold, predictions) in evaluation.py's shapes from rows with ``item_id``, ``detail`` and ``fields``.

    Rows whose detail lacks the reading's scores (an example that reading did not score) are left
    out of both files, as our metrics leave them out.
    """
    if reading not in SCORE_KEYS:
        raise ValueError(f"reading: {reading!r} is not one of {sorted(SCORE_KEYS)}")
    gold: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    predictions: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for number, row in enumerate(rows, start=1):
        missing = [name for name in REQUIRED if row.get(name) in (None, "")]
        if missing:
            raise ValueError(f"row {number}: no {', '.join(missing)} (the query must select {', '.join(REQUIRED)})")
        item_id, detail, fields = str(row["item_id"]), _mapping(row["detail"]), _mapping(row["fields"])
        keys = {suffix: SCORE_KEYS[reading].format(suffix) for suffix in CHOICES}
        if not all(key in detail for key in keys.values()):
            continue
        kind = detail["kind"]
        sentences = [
            {
                "id": f"{item_id}:{label}",
                "sentence": fields[label],
                "gold_label": label,
                "labels": [{"label": label, "human_id": "gold"}],
            }
            for label in CHOICES.values()
        ]
        gold[kind].append({"id": item_id, "target": detail["target"], "bias_type": detail["bias_type"],
                           "context": fields["context"], "sentences": sentences})  # fmt: skip
        predictions[kind] += [
            {"id": f"{item_id}:{label}", "score": float(detail[keys[suffix]])} for suffix, label in CHOICES.items()
        ]
    return {"version": "1.0", "data": gold}, predictions


def write_official_inputs(csv_path: Path, out: Path, name: str = "themis", reading: str = "official") -> list[Path]:
    """Write ``gold.json`` and ``predictions_<name>_<reading>.json`` under ``out`` from a ``themis sql`` CSV."""
    with csv_path.open(newline="", encoding="utf-8") as handle:
        gold, predictions = official_inputs(csv.DictReader(handle), reading)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "gold.json", out / f"predictions_{name}_{reading}.json"]
    for path, document in zip(paths, (gold, predictions), strict=True):
        path.write_text(json.dumps(document, ensure_ascii=False, indent=1), encoding="utf-8")
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="themis sql --format csv output: item_id, detail, fields")
    parser.add_argument("out", type=Path)
    parser.add_argument("--reading", choices=sorted(SCORE_KEYS), default="official")
    parser.add_argument("--name", default="themis", help="the predictions file's name part (no '_')")
    args = parser.parse_args(argv)
    if "_" in args.name:
        parser.error("--name: no '_' (evaluation.py files results under the name's second '_' part)")
    for path in write_official_inputs(args.csv, args.out, args.name, args.reading):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
