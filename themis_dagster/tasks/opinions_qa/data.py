"""OpinionQA's parameters and items: each question asked as it is (``default``) and under each persona prompt.

Questions: every question of the 15 waves with group counts in the mirror (684; ``survey.py``), or
the keys ``questions`` names. ``limit`` takes a seeded sample of them that keeps the steered ones.
Steering (the paper's steerability, on its 500 most contentious questions): the questions of
``Pew_American_Trends_Panel_disagreement_500`` among those, at most ``steer_limit`` (a seeded
sample), each asked once per persona prompt style (``steer_styles``: QA, BIO, PORTRAY) and group
(``steer_groups``: ``ATTR=group`` or a whole attribute; default every group of ``attributes``).

An item is one question in one context: ``<key>`` (``default``) or ``<key>|<style>|<ATTR>=<group>``;
its subset is the style. It carries what its requests and its judgment need: the options, their
ordinal positions, the topics and each measured group's answer distribution (``human``) and
refusal share. A question key that no wave has, or one without group counts, fails before any
engine starts, naming the key, the field and the files looked in.
"""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from themis_dagster.errors import load_yaml
from themis_dagster.tasks.opinions_qa import survey
from themis_dagster.tasks.opinions_qa.representativeness import group_distribution
from themis_dagster.tasks.opinions_qa.survey import OVERALL, Question, group_key
from themis_dagster.tasks.persona_poll.parser import letters
from themis_dagster.tasks.spec import Item, TaskParams, distinct

Style = Literal["qa", "bio", "portray"]
STYLES: tuple[Style, ...] = ("qa", "bio", "portray")
DEFAULT = "default"
STEERING_FILE = Path(__file__).resolve().parent / "steering.yaml"


class Params(TaskParams):
    questions: tuple[str, ...] | None = Field(default=None, min_length=1, description="Only these question keys.")
    attributes: tuple[survey.Attribute, ...] = Field(
        default=survey.ATTRIBUTES, min_length=1, description="The demographic attributes whose groups are measured."
    )
    steer_styles: tuple[Style, ...] = Field(default=STYLES, description="Persona prompt styles (none: no steering).")
    steer_groups: tuple[str, ...] | None = Field(
        default=None, description="Groups steered toward, 'ATTR=group' or 'ATTR' (None: every group of attributes)."
    )
    steer_limit: int | None = Field(default=None, ge=1, description="At most this many steered questions.")
    template: str = Field(default="opinions_mc", min_length=1, description="The question prompt (templates file).")

    @field_validator("questions", "attributes", "steer_styles", "steer_groups")
    @classmethod
    def _distinct(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return distinct(value, "entries repeat: {values}")


@cache
def steering_phrases() -> dict[str, dict[str, Any]]:
    """``steering.yaml``: how each attribute's persona prompts name its groups."""
    raw = load_yaml(STEERING_FILE.read_text(encoding="utf-8"))
    missing = [attribute for attribute in survey.ATTRIBUTES if attribute not in raw]
    if missing:
        raise ValueError(f"{STEERING_FILE}: no phrasing for {missing}")
    return {str(attribute): dict(entry) for attribute, entry in raw.items()}


def persona(attribute: str, group: str, groups: tuple[str, ...]) -> dict[str, Any]:
    """What the steer_* templates render for one group: its QA question and answer, BIO and PORTRAY texts."""
    phrases = steering_phrases()[attribute]
    answers = [phrases.get("answers", {}).get(g, g) for g in groups] + ["Refused"]
    worded = phrases.get("wording", {}).get(group, group)
    return {
        "question": phrases["question"],
        "options": list(zip(letters(len(answers)), answers, strict=True)),
        "answer": letters(len(answers))[groups.index(group)],
        "topic": phrases["topic"],
        "statement": phrases["statement"].replace("{group}", worded),
        "portrayal": phrases["portrayal"].replace("{group}", worded),
    }


class Survey:
    """The mirror's questions, counts and topics, read from the task's resolved files."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files
        self.questions: dict[str, Question] = {}
        for wave in survey.WAVES:
            self.questions |= survey.read_questions(files[survey.info_file(wave)], wave)
        self.groups = survey.read_groups(files[survey.METADATA])
        self.topics = survey.read_topics(files[survey.TOPICS])
        self.contentious = set(survey.read_disagreement(files[f"{survey.DISAGREEMENT}/info.csv"]))

    def counts(self, question: Question, attribute: str) -> dict[str, dict[str, float]] | None:
        return survey.read_counts(self.files[survey.counts_file(question.wave, attribute)]).get(question.key)

    def covered(self, question: Question) -> bool:
        """Whether every attribute file has the question's counts."""
        return all(self.counts(question, attribute) is not None for attribute in survey.ATTRIBUTES)

    def chosen(self, keys: tuple[str, ...]) -> list[Question]:
        """The questions ``keys`` name, each checked to exist with group counts."""
        found = []
        for key in keys:
            question = self.questions.get(key)
            if question is None:
                looked = ", ".join(str(self.files[survey.info_file(wave)]) for wave in survey.WAVES)
                raise ValueError(f"params.questions: {key!r} is not a question of the mirror; looked in {looked}")
            if not self.covered(question):
                where = self.files[survey.counts_file(question.wave, survey.ATTRIBUTES[0])]
                raise ValueError(
                    f"params.questions: {key!r} has no group counts in {where} (nor the wave's other files)"
                )
            found.append(question)
        return found

    def human(self, question: Question, keys: list[str]) -> tuple[dict[str, list[float]], dict[str, float]]:
        """Each named group's answer distribution over the ordinal options and refusal share (groups without any
        ordinal answer left out)."""
        distributions, refusals = {}, {}
        for key in keys:
            if key == OVERALL:
                counts = survey.whole_population(self.counts(question, survey.WHOLE_POPULATION_ATTRIBUTE) or {})
            else:
                attribute, group = key.split("=", 1)
                counts = (self.counts(question, attribute) or {}).get(group, {})
            found = group_distribution(counts, question.options, len(question.ordinal))
            if found is not None:
                distributions[key], refusals[key] = found
        return distributions, refusals


def steer_targets(params: Params, groups: dict[str, tuple[str, ...]]) -> list[tuple[str, str]]:
    """(attribute, group) pairs steered toward, in the survey's order; an unknown name fails naming the field."""
    known: list[tuple[str, str]] = [
        (attribute, group) for attribute in params.attributes for group in groups[attribute]
    ]
    if params.steer_groups is None:
        return known
    chosen = set()
    for name in params.steer_groups:
        attribute, _, group = name.partition("=")
        matched = [(a, g) for a, g in known if a == attribute and group in ("", g)]
        if not matched:
            options = sorted({a for a, _ in known} | {group_key(a, g) for a, g in known})
            raise ValueError(f"params.steer_groups: {name!r} is no attribute or group of params.attributes: {options}")
        chosen.update(matched)
    return [pair for pair in known if pair in chosen]


def select(params: Params, mirror: Survey) -> tuple[list[Question], list[Question]]:
    """(every question asked, the steered ones), in the mirror's order (module docstring)."""
    order = {key: position for position, key in enumerate(mirror.questions)}
    pool = (
        mirror.chosen(params.questions)
        if params.questions
        else [q for q in mirror.questions.values() if mirror.covered(q)]
    )
    rng = random.Random(params.seed)  # noqa: S311 - a seeded sample of questions, not security
    steered = [q for q in pool if q.key in mirror.contentious] if params.steer_styles else []
    if params.steer_limit is not None and len(steered) > params.steer_limit:
        steered = rng.sample(steered, params.steer_limit)
    if params.limit is not None and not params.questions and len(pool) > params.limit:
        if len(steered) > params.limit:
            steered = rng.sample(steered, params.limit)
        rest = [q for q in pool if q not in steered]
        pool = steered + rng.sample(rest, params.limit - len(steered))
    return sorted(pool, key=lambda q: order[q.key]), sorted(steered, key=lambda q: order[q.key])


def question_fields(question: Question, mirror: Survey) -> dict[str, Any]:
    return {
        "key": question.key,
        "wave": question.wave,
        "question": question.text,
        "options": list(question.options),
        "ordinal": list(question.ordinal),
        "topics": list(mirror.topics.get(question.topic_key, ())),
    }


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """Each question's default item, then its steered items (style by style, group by group)."""
    mirror = Survey(files)
    asked, steered = select(params, mirror)
    targets = steer_targets(params, mirror.groups)
    measured = [OVERALL] + [group_key(a, g) for a in params.attributes for g in mirror.groups[a]]
    items = []
    for question in asked:
        human, refusal = mirror.human(question, measured)
        fields = question_fields(question, mirror) | {"style": DEFAULT, "steer_group": None, "persona": None}
        items.append(Item(question.key, DEFAULT, fields | {"human": human, "human_refusal": refusal}))
    for question in steered:
        for style in params.steer_styles:
            for attribute, group in targets:
                target = group_key(attribute, group)
                human, refusal = mirror.human(question, [OVERALL, target])
                if target not in human:
                    continue
                fields = question_fields(question, mirror) | {
                    "style": style,
                    "steer_group": target,
                    "persona": persona(attribute, group, mirror.groups[attribute]),
                    "human": human,
                    "human_refusal": refusal,
                }
                items.append(Item(f"{question.key}|{style}|{target}", style, fields))
    return items
