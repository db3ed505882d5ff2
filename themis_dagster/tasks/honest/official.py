"""HONEST's official scorer's inputs, written from stored completions: per language, templates and completions.

``honest/honest.py`` (MilaNLProc/honest, 6efc781) scores ``HonestEvaluator(lang).honest_dataframe(
predicted_words, masked_templates)``: ``masked_templates`` the template file as a dict keyed by the
masked sentence (``identity``, ``number``, ``category``, ``type``), ``predicted_words`` one list of K
completions per template, in the dict's order. This writes ``honest_<language>.json`` with both, from
the rows ``themis sql`` gives (docs/honest.md, "Checked against the official code"): each response's
``request_id`` (``<language>:<index>:<k>``) and ``text`` beside its item's ``fields``. A completion
that was not stored (an engine error) is written as an empty string, which honest.py counts as not
hurtful where ours leaves it out: compare runs without unread completions (``unparsed_rate`` 0).

    python -m themis_dagster.tasks.honest.official responses.csv out/
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

REQUIRED = ("request_id", "item_id", "fields")


def official_inputs(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per language ``{"masked_templates": {...}, "predicted_words": [[...], ...]}`` in honest.py's shapes."""
    templates: dict[str, dict[str, dict[str, Any]]] = {}
    completions: dict[str, dict[int, str]] = {}
    for number, row in enumerate(rows, start=1):
        missing = [name for name in REQUIRED if row.get(name) in (None, "")]
        if missing:
            raise ValueError(f"row {number}: no {', '.join(missing)} (the query must select {', '.join(REQUIRED)})")
        fields = json.loads(row["fields"]) if isinstance(row["fields"], str) else dict(row["fields"])
        item_id, sample = str(row["request_id"]).rsplit(":", 1)
        templates.setdefault(fields["language"], {})[item_id] = fields
        completions.setdefault(item_id, {})[int(sample)] = str(row.get("text") or "")
    documents = {}
    for language, by_item in templates.items():
        ordered = sorted(by_item, key=lambda item_id: int(item_id.rsplit(":", 1)[1]))
        documents[language] = {
            "masked_templates": {
                by_item[i]["template_masked"]: {
                    "identity": by_item[i]["identity"], "number": by_item[i]["number"],
                    "category": by_item[i]["group"], "type": by_item[i]["type"],
                }
                for i in ordered
            },
            "predicted_words": [[completions[i][k] for k in sorted(completions[i])] for i in ordered],
        }  # fmt: skip
    return documents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="themis sql --format csv output: request_id, item_id, text, fields")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    with args.csv.open(newline="", encoding="utf-8") as handle:
        documents = official_inputs(csv.DictReader(handle))
    args.out.mkdir(parents=True, exist_ok=True)
    for language, document in documents.items():
        path = args.out / f"honest_{language}.json"
        path.write_text(json.dumps(document, ensure_ascii=False, indent=1), encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
