"""BOLD's prompts as items (Dhamala et al., 2021; github amazon-science/bold, ``prompts/<domain>_prompt.json``).

Each domain file maps a group (``American_actresses``, ``islam``) to the people or topics of its
Wikipedia source, each with one or more sentence beginnings: ``{group: {name: [prompt, ...]}}``.
23,679 prompts in all. One item per prompt; ``subset`` is ``<domain>:<group>``.

One published prompt (profession, ``Information``) begins with Wikipedia markup the scrape kept,
``{{Use \n\ndates|date=May 2020}}``: a page-maintenance template that Wikipedia renders as nothing.
``read_domain`` removes such a template as Wikipedia renders it and logs it, so the family declares
``{{ x }}`` and the prompts stage fails on any other.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from themis_dagster.exchange import GenerationParams
from themis_dagster.tasks.spec import Item, ModelId, TaskParams, distinct

# What the judge model may answer to each of its questions (``second_opinion.py``).
JUDGE_ANSWERS = {"regard": ("positive", "negative", "neutral"), "toxicity": ("non-toxic", "toxic")}

Domain = Literal["gender", "race", "profession", "political_ideology", "religious_ideology"]
DOMAINS: tuple[Domain, ...] = ("gender", "race", "profession", "political_ideology", "religious_ideology")

# HELM's BOLD run spec (helm/benchmark/run_specs/classic_run_specs.py, get_bold_spec): plain
# completion, temperature 0.9 ("to approximate nucleus sampling conditions"), 20 new tokens
# (RealToxicityPrompts' setting), one continuation per prompt. Seeded, so a re-run repeats it.
HELM_GENERATION = GenerationParams(max_tokens=20, temperature=0.9, top_p=1.0, seed=1234)


_WIKI_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}\s*")
_log = logging.getLogger(__name__)


def unmarked(prompt: str, where: str) -> str:
    """The prompt without Wikipedia template markup (``{{...}}``, rendered as nothing), logged naming ``where``."""
    text = _WIKI_TEMPLATE.sub("", prompt)
    if text != prompt:
        _log.warning("BOLD %s: Wikipedia template markup removed from the prompt %r", where, prompt[:80])
    return text


def file_name(domain: str) -> str:
    """The catalogue's (and the repository's) file name of a domain's prompts."""
    return f"{domain}_prompt.json"


class Params(TaskParams):
    domains: tuple[Domain, ...] = Field(default=DOMAINS, min_length=1, description="BOLD domains to evaluate.")
    limit: int | None = Field(
        default=None, ge=1, description="A seeded sample of at most this many prompts per group (None: all)."
    )
    generation: GenerationParams = HELM_GENERATION
    judge_model: ModelId | None = Field(
        default=None,
        description="Registered model that rates each continuation's regard and toxicity (None: those metrics "
        "are not computed and stay NULL).",
    )
    judge_max_tokens: int = Field(default=8, ge=1, le=64, description="New tokens of each judge answer.")
    panel_judges: tuple[ModelId, ...] = Field(
        default=(),
        description="More registered models asked judge_model's questions about the same continuations: their "
        "agreement with it (Fleiss' kappa per question) is reported, and with judge_verdict 'majority' their "
        "majority label is the verdict.",
    )
    judge_verdict: Literal["judge_model", "majority"] = Field(
        default="judge_model",
        description="Whose label counts: judge_model's, or the majority of judge_model and panel_judges (a tie is "
        "no verdict, left out like an unreadable answer).",
    )

    @field_validator("domains")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return distinct(value, "domains must not repeat, got {values}")

    @model_validator(mode="after")
    def _panel(self) -> Params:
        """A panel needs a first judge, distinct members, and a majority needs at least three judges."""
        if self.panel_judges and self.judge_model is None:
            raise ValueError("panel_judges: needs judge_model, the judge the panel sits beside")
        distinct(self.judges(), "panel_judges: judge_model and panel_judges must not repeat, got {values}")
        if self.judge_verdict == "majority" and len(self.judges()) < 3:
            raise ValueError(
                f"judge_verdict: 'majority' needs at least three judges (judge_model and two panel_judges), "
                f"got {list(self.judges())}"
            )
        return self

    def judges(self) -> tuple[str, ...]:
        """Every judge asked, judge_model first (none without judge_model)."""
        return () if self.judge_model is None else (self.judge_model, *self.panel_judges)

    def registered_models(self) -> dict[str, str]:
        """The panel's judges must be registered, checked before any engine starts (judge_model is checked too)."""
        return super().registered_models() | {f"panel_judges[{i}]": j for i, j in enumerate(self.panel_judges)}


def read_domain(path: Path, domain: str) -> list[tuple[str, str, str]]:
    """``(group, name, prompt)`` in the file's order; a file of another shape is an error naming it."""
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} ({domain}): expected {{group: {{name: [prompt, ...]}}}}")
    rows: list[tuple[str, str, str]] = []
    for group, names in data.items():
        if not isinstance(names, dict):
            raise ValueError(f"{path.name}: group {group!r} is not a {{name: [prompt, ...]}} object")
        for name, prompts in names.items():
            if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
                raise ValueError(f"{path.name}: {group}/{name} is not a list of prompts")
            rows.extend((group, name, unmarked(prompt, f"{path.name} {group}/{name}")) for prompt in prompts)
    return rows


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """One item per prompt of the chosen domains; ``limit`` samples each group (seeded, order kept)."""
    rng = np.random.default_rng(params.seed)
    items = []
    for domain in params.domains:
        rows = read_domain(files[file_name(domain)], domain)
        by_group: dict[str, list[int]] = {}
        for index, (group, _, _) in enumerate(rows):
            by_group.setdefault(group, []).append(index)
        for group, indices in by_group.items():
            chosen = indices
            if params.limit is not None and params.limit < len(indices):
                chosen = sorted(rng.choice(indices, size=params.limit, replace=False).tolist())
            for index in chosen:
                _, name, prompt = rows[index]
                fields = {"domain": domain, "group": group, "name": name, "prompt": prompt}
                items.append(Item(item_id=f"{domain}:{index}", subset=f"{domain}:{group}", fields=fields))
    return items
