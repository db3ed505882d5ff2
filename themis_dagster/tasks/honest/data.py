"""HONEST templates as items, and the task's parameters (Nozza et al., NAACL 2021; github MilaNLProc/honest).

The templates are TAB-separated files ``resources/<set>/<lang>_template.tsv`` with a masked
sentence (``template_masked``, e.g. ``the woman should work as a [M].``), the identity term, its
group (``category``: female / male in the binary set, the queer and non-queer groups in the
``queer_nonqueer`` set), ``number`` and ``type`` (occupation, descriptive adjective or verb). The two
sets order their columns differently; they are read by name.

``honest.py`` reads a file with pandas (``index_col=0``) and turns it into a dict keyed by the
masked sentence, so a sentence the file repeats (en: "the children ..." listed as male and as
female) is one template, the last row's, at the place of the first: en 724 of 810 rows, es 780,
fr 784, it 810, pt 827, ro 839, queer_nonqueer en 705. The same is done here, so HONEST's
denominator (K x templates) is the reference's.

The prompt is the masked sentence up to ``[M]`` (every template ends with ``[M].``), without the
space before it, as a causal model continues it: ``the woman should work as a``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field, ValidationInfo, field_validator

from themis_dagster.exchange import GenerationParams
from themis_dagster.tasks.spec import Item, TaskParams, distinct

Language = Literal["en", "es", "fr", "it", "pt", "ro"]
TemplateSet = Literal["binary", "queer_nonqueer"]
MatchUnit = Literal["sentence", "word", "first_word"]
LANGUAGES: dict[str, tuple[Language, ...]] = {
    "binary": ("en", "es", "fr", "it", "pt", "ro"),
    "queer_nonqueer": ("en",),
}
"""The languages each template set has (the mirror's files, as honest.py offers them)."""
MASK = "[M]"
COLUMNS = ("template_masked", "identity", "category", "number", "type")

# The completions: K samples per template, each its own seed (seed + k), at temperature 1 (plain
# sampling, as the HF pipeline the HONEST authors use for GPT-2 samples), a few words long.
SAMPLING = GenerationParams(max_tokens=16, temperature=1.0, top_p=1.0, seed=1234)


class Params(TaskParams):
    template_set: TemplateSet = Field(
        default="binary", description="HONEST's template set: binary gender (6 languages) or queer_nonqueer (en)."
    )
    languages: tuple[Language, ...] = Field(
        default=LANGUAGES["binary"], min_length=1, description="Template languages to evaluate (a subset each)."
    )
    k: int = Field(
        default=20, ge=1, le=100, description="Completions per template (HONEST's K; the paper reports 1, 5, 20)."
    )
    match_unit: MatchUnit = Field(
        default="sentence",
        description="How a completion is matched against HurtLex (honest.py): 'sentence' splits it on punctuation "
        "and whitespace and counts its first hurtful word; 'word' compares the whole completion to the lexicon; "
        "'first_word' (ours) looks up only the first word of the sentence split.",
    )
    limit: int | None = Field(
        default=None, ge=1, description="A seeded sample of at most this many templates per language (None: all)."
    )
    generation: GenerationParams = SAMPLING

    @field_validator("languages")
    @classmethod
    def _set_has_languages(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        """Distinct languages the chosen template set has a file for; else an error here, before any engine starts."""
        distinct(value, "languages must not repeat, got {values}")
        template_set = info.data.get("template_set")
        missing = [
            language for language in value if template_set in LANGUAGES and language not in LANGUAGES[template_set]
        ]
        if missing:
            raise ValueError(
                f"the {template_set} templates have no {missing} (available: {list(LANGUAGES[str(template_set)])})"
            )
        return value


def template_file(template_set: str, language: str) -> str:
    """The catalogue's name of a set's template file (``binary_en_template.tsv``)."""
    return f"{template_set}_{language}_template.tsv"


def lexicon_file(language: str) -> str:
    """The catalogue's name of a language's HurtLex 1.2 file (``hurtlex_EN.tsv``)."""
    return f"hurtlex_{language.upper()}.tsv"


def read_templates(path: Path) -> list[dict[str, str]]:
    """The file's templates as honest.py keys them: one per masked sentence, the last row's, in first-seen order."""
    frame = pd.read_csv(path, sep="\t")
    absent = [column for column in COLUMNS if column not in frame.columns]
    if absent:
        raise ValueError(f"{path.name}: missing column(s) {absent}; expected {list(COLUMNS)}")
    templates: dict[str, dict[str, str]] = {}
    for row in frame.loc[:, list(COLUMNS)].itertuples(index=False):
        masked = str(row.template_masked)
        if MASK not in masked:
            raise ValueError(f"{path.name}: template without {MASK}: {masked!r}")
        templates[masked] = {column: str(getattr(row, column)) for column in COLUMNS}
    return list(templates.values())


def prompt_of(masked: str) -> str:
    """What the model continues: the template up to its mask, trailing spaces dropped."""
    return masked.split(MASK, 1)[0].rstrip()


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """One item per template of each chosen language; ``limit`` samples each language (seeded, order kept)."""
    rng = np.random.default_rng(params.seed)
    items = []
    for language in params.languages:
        templates = read_templates(files[template_file(params.template_set, language)])
        chosen = list(range(len(templates)))
        if params.limit is not None and params.limit < len(templates):
            chosen = sorted(rng.choice(len(templates), size=params.limit, replace=False).tolist())
        for index in chosen:
            row = templates[index]
            fields = {
                "language": language,
                "template_set": params.template_set,
                "template_masked": row["template_masked"],
                "prompt": prompt_of(row["template_masked"]),
                "identity": row["identity"],
                "group": row["category"],
                "number": row["number"],
                "type": row["type"],
            }
            items.append(Item(item_id=f"{language}:{index}", subset=f"{language}:{row['category']}", fields=fields))
    return items
