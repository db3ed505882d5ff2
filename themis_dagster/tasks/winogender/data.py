"""Winogender's sentences as items, in the fields of lm-eval's dataset (oskarvanderwal/winogender).

``all_sentences.tsv`` names each sentence ``<occupation>.<participant>.<answer>.<gender>.txt``:
``answer`` is 0 when the pronoun refers to the occupation and 1 when it refers to the other
participant (the ``answer`` column of ``templates.tsv``), ``participant`` is ``someone`` in the
half of the sentences that use no participant noun. lm-eval's dataset has the same fields
(``sentence, pronoun, occupation, participant, gender, label``), so its prompt applies as is.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Literal

from pydantic import Field

from themis_dagster.tasks.spec import Item, TaskParams

Gender = Literal["male", "female", "neutral"]
PRONOUNS = {"he", "his", "him", "she", "her", "they", "their", "them"}


class Params(TaskParams):
    template: str = Field(default="winogender_refers", min_length=1, description="Prompt (winogender_templates.yaml).")
    target_delimiter: str = Field(default=" ", max_length=4, description="Text between the prompt and each antecedent.")
    genders: list[Gender] = Field(
        default=["male", "female", "neutral"], min_length=1, description="Pronoun genders to evaluate."
    )


def occupation_stats(path: Path) -> dict[str, dict[str, float]]:
    """Per occupation: ``bls_pct_female`` and ``bergsma_pct_female`` (occupations-stats.tsv)."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return {
        row["occupation"]: {key: float(row[key]) for key in ("bls_pct_female", "bergsma_pct_female")} for row in rows
    }


def majority_gender(bls_pct_female: float) -> str:
    """The occupation's majority gender by the BLS share (the paper's reference for "gotcha")."""
    return "female" if bls_pct_female > 50.0 else "male"


def is_gotcha(gender: str, answer: int, bls_pct_female: float) -> bool:
    """Rudinger et al. (2018), sec. 4: a "gotcha" sentence is one where the pronoun's gender does
    not match the occupation's majority gender (BLS) when it refers to the occupation, or
    matches it when it refers to the other participant: a model that follows the occupation's
    majority gender gets it wrong. Only male and female pronouns can be gotchas (240 sentences).
    """
    if gender == "neutral":
        return False
    majority = majority_gender(bls_pct_female)
    return gender != majority if answer == 0 else gender == majority


def pronoun_of(sentence: str, sentid: str) -> str:
    """The one pronoun in the sentence, lower-cased (lm-eval's ``pronoun`` field)."""
    found: list[str] = [word.lower() for word in re.findall(r"[A-Za-z]+", sentence) if word.lower() in PRONOUNS]
    if len(found) != 1:
        raise ValueError(f"all_sentences.tsv: sentence {sentid!r} has {len(found)} pronouns, expected one")
    return found[0]


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """One item per sentence of the chosen genders, in the file's order; ``subset`` is the pronoun gender."""
    stats = occupation_stats(files["occupations-stats.tsv"])
    with files["all_sentences.tsv"].open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    items = []
    for row in rows:
        sentid = row["sentid"]
        parts = sentid.split(".")
        if len(parts) != 5 or parts[2] not in ("0", "1") or parts[3] not in ("male", "female", "neutral"):
            raise ValueError(
                f"all_sentences.tsv: sentid {sentid!r} is not <occupation>.<participant>.<0|1>.<gender>.txt"
            )
        occupation, participant, answer, gender = parts[0], parts[1], int(parts[2]), parts[3]
        if gender not in params.genders:
            continue
        if occupation not in stats:
            raise ValueError(f"occupations-stats.tsv has no row for occupation {occupation!r} (sentence {sentid!r})")
        bls = stats[occupation]["bls_pct_female"]
        fields = {
            "sentence": row["sentence"],
            "pronoun": pronoun_of(row["sentence"], sentid),
            "occupation": occupation,
            "participant": participant,
            "gender": gender,
            "label": answer,
            "gotcha": is_gotcha(gender, answer, bls),
            "bls_pct_female": bls,
            "bergsma_pct_female": stats[occupation]["bergsma_pct_female"],
        }
        items.append(Item(item_id=sentid.removesuffix(".txt"), subset=gender, fields=fields))
    return items[: params.limit] if params.limit is not None else items
