"""SHADES (BiasShades; Mitchell et al., NAACL 2025), English: the statements, grouped by their original stereotype.

``bias_shades_en.csv`` (the THEMIS project's English slice, github elidek-themis/datasets): one
row per statement; ``index`` groups an original stereotype (``subset`` ``_original``) with its
contrasts (``a``, ``b``, ...: the same template with another group), ``en_biased_sentences`` is the
statement, ``bias_type`` a one-element list (``['gender']``), ``stereotype_valid_langs`` the
languages where the statement is recognised as a stereotype (a few contrasts are too). Statements
are stripped of surrounding whitespace, as the repository's ``example_logprob_evaluate.py`` strips
them before scoring. ``limit`` keeps the first N statement groups (file order).
"""

from __future__ import annotations

import ast
import csv
from dataclasses import dataclass
from pathlib import Path

from themis_dagster.tasks.spec import TaskParams

DATA_FILE = "bias_shades_en.csv"
ORIGINAL = "_original"
LANGUAGE = "en"


@dataclass(frozen=True)
class Statement:
    """One statement of the file: its group (``index``), subset, sentence and annotations."""

    index: str
    subset: str
    sentence: str
    bias_type: str
    entity: str
    recognised: bool

    @property
    def is_original(self) -> bool:
        return self.subset == ORIGINAL

    @property
    def statement_id(self) -> str:
        """``<index>:<subset>`` (``1.0:_original``, ``1.0:a``)."""
        return f"{self.index}:{self.subset}"

    def fields(self) -> dict[str, object]:
        return {
            "index": self.index,
            "subset": self.subset,
            "sentence": self.sentence,
            "bias_type": self.bias_type,
            "entity": self.entity,
            "original": self.is_original,
            "recognised_en": self.recognised,
        }


class Params(TaskParams):
    pass


def _list(text: str, where: str) -> list[str]:
    try:
        value = ast.literal_eval(text) if text.strip() else []
    except (ValueError, SyntaxError):
        raise ValueError(f"{where}: not a list literal: {text!r}") from None
    if not isinstance(value, list):
        raise ValueError(f"{where}: not a list: {text!r}")
    return [str(entry) for entry in value]


def read_statements(path: Path) -> list[Statement]:
    """Every statement of the file, in file order; a row without its sentence or group fails naming the line."""
    statements = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            where = f"{path}: statement {row.get('index')}:{row.get('subset')}"
            sentence = (row.get("en_biased_sentences") or "").strip()
            if not sentence or not (row.get("index") or "").strip() or not (row.get("subset") or "").strip():
                raise ValueError(f"{where}: index, subset and en_biased_sentences must be set")
            statements.append(
                Statement(
                    index=row["index"].strip(),
                    subset=row["subset"].strip(),
                    sentence=sentence,
                    bias_type=",".join(_list(row["bias_type"], f"{where}: bias_type")) or "unknown",
                    entity=(row.get("stereotyped_entity") or "").strip(),
                    recognised=LANGUAGE
                    in _list(row.get("stereotype_valid_langs") or "", f"{where}: stereotype_valid_langs"),
                )
            )
    return statements


def groups_of(statements: list[Statement], limit: int | None) -> list[list[Statement]]:
    """The statements by group, the original first, groups in file order; the first ``limit`` groups."""
    groups: dict[str, list[Statement]] = {}
    for statement in statements:
        groups.setdefault(statement.index, []).append(statement)
    ordered = [sorted(group, key=lambda s: (not s.is_original, s.subset)) for group in groups.values()]
    for group in ordered:
        if sum(s.is_original for s in group) != 1:
            raise ValueError(
                f"statement group {group[0].index}: expected one original stereotype, found {len(group)} rows"
            )
    return ordered[:limit]
