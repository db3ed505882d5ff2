"""A persona poll, declared in one YAML file: a question, its options, persona templates and their personas.

THEMIS's election poll (github elidek-themis/us-elections) asks a model to speak as a persona
("As a resident of {persona}, in the 2024 US presidential election I will vote for the") and reads
the probabilities of each option's wordings ("Democratic party/candidate/nominee"). A poll file
declares the same parts, so any poll is one file (``polls/us_elections_2024.yaml`` is that one):

- ``options``: each option's name and its wordings (one or more continuations of the persona
  template; their probabilities are summed, as THEMIS sums its three wordings);
- ``question``: what the chat variant asks, the options listed under it as lettered choices;
- ``persona_sets``: per set (states, gender, age, ...) a ``template`` with the ``{persona}``
  placeholder, the ``personas`` it is filled with, an optional ``chat_system`` (the chat variant's
  system message, also with ``{persona}``) and an optional ``reference``: a CSV file (relative to
  the poll file) with a ``persona`` column and one column per option, each row a persona's reference
  distribution (counts or shares, normalised here).

``read_poll`` reads and checks it before any engine starts; every error names the file, the key
(or the CSV line) and the field: a template without its placeholder, an option missing from a
reference CSV, a reference row that does not sum to a positive number, a persona the set lacks.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from themis_dagster.errors import ConfigError, StrictModel, validated
from themis_dagster.tasks.declaration import read_yaml_mapping

PLACEHOLDER = "{persona}"
PERSONA_COLUMN = "persona"
DEFAULT_CHAT_SYSTEM = "Assume the identity of {persona}."
Reference = dict[str, dict[str, float]]
"""A persona set's reference: persona -> option -> share (each row sums to 1)."""


def fill(template: str, persona: str) -> str:
    """``template`` with its ``{persona}`` placeholder(s) replaced (no other braces are read)."""
    return template.replace(PLACEHOLDER, persona)


class PersonaSet(StrictModel):
    """Personas asked with one template (THEMIS: the 51 states; or gender, age, ...)."""

    template: str = Field(min_length=1, description="The prompt whose continuation is scored, with {persona}.")
    chat_system: str = Field(default=DEFAULT_CHAT_SYSTEM, description="The chat variant's system message.")
    personas: tuple[str, ...] = Field(min_length=1)
    reference: str | Reference | None = Field(
        default=None, description="A CSV file (relative to the poll file) of reference distributions, or them read."
    )

    @field_validator("template", "chat_system")
    @classmethod
    def _has_placeholder(cls, template: str) -> str:
        if PLACEHOLDER not in template:
            raise ValueError(f"{template!r} has no {PLACEHOLDER} placeholder")
        return template

    @field_validator("personas")
    @classmethod
    def _distinct(cls, personas: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({p for p in personas if personas.count(p) > 1})
        if repeated or any(not p.strip() for p in personas):
            raise ValueError(f"personas must be distinct and non-empty; repeated: {repeated}")
        return personas


class PollSpec(StrictModel):
    """One poll file (module docstring); ``file``: where it was read from (None: declared inline)."""

    poll: str = Field(pattern=r"^[a-z0-9_]{1,48}$", description="The poll's name.")
    description: str = ""
    source: str = Field(default="", description="Where the poll comes from (a paper, a repository).")
    question: str = Field(min_length=1, description="The chat variant's question.")
    options: dict[str, tuple[str, ...]] = Field(description="Option name -> its wordings (continuations).")
    delimiter: str = Field(default=" ", max_length=4, description="Text between the persona prompt and a wording.")
    persona_sets: dict[str, PersonaSet] = Field(min_length=1)
    file: str | None = None

    @field_validator("options")
    @classmethod
    def _options(cls, options: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        if len(options) < 2:
            raise ValueError(f"a poll needs at least two options, got {list(options)}")
        for name, wordings in options.items():
            if not name.strip() or not wordings or any(not w.strip() for w in wordings):
                raise ValueError(f"option {name!r}: a non-empty name and at least one non-empty wording")
        return options

    @model_validator(mode="after")
    def _references_read(self) -> PollSpec:
        for name, persona_set in self.persona_sets.items():
            if isinstance(persona_set.reference, dict):
                check_reference(persona_set.reference, self, name, where=f"persona_sets.{name}.reference")
        return self

    def reference(self, persona_set: str) -> Reference | None:
        """The set's reference distributions (read), or None."""
        found = self.persona_sets[persona_set].reference
        return found if isinstance(found, dict) else None


def check_reference(reference: Reference, poll: PollSpec, name: str, where: str) -> None:
    """An inline reference: known personas, every option, shares that sum to 1."""
    personas = poll.persona_sets[name].personas
    for persona, shares in reference.items():
        if persona not in personas:
            raise ValueError(f"{where}: persona {persona!r} is not one of persona_sets.{name}.personas")
        if set(shares) != set(poll.options):
            raise ValueError(f"{where}.{persona}: options {sorted(shares)}, expected {sorted(poll.options)}")
        if not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-9) or min(shares.values()) < 0:
            raise ValueError(f"{where}.{persona}: shares must be non-negative and sum to 1, got {shares}")


def read_reference(path: Path, poll: PollSpec, name: str, field: str) -> Reference:
    """A reference CSV: a ``persona`` column and one column per option; each row normalised to shares.

    Fails naming the CSV file, the line and the field: an option without its column, a column that
    is no option, a persona the set lacks (or twice), a value that is not a non-negative number, a
    row that does not sum to a positive number.
    """
    if not path.is_file():
        raise ConfigError(f"{poll.file}: {field}: reference file {path} not found")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header = [cell.strip() for cell in rows[0]] if rows else []
    if PERSONA_COLUMN not in header:
        raise ConfigError(f"{path}: line 1: no {PERSONA_COLUMN!r} column (field {field}); columns: {header}")
    for option in poll.options:
        if option not in header:
            raise ConfigError(
                f"{path}: line 1: option {option!r} (options.{option} of {poll.file}) has no column (field {field}); "
                f"columns: {header}"
            )
    extra = [column for column in header if column != PERSONA_COLUMN and column not in poll.options]
    if extra:
        raise ConfigError(f"{path}: line 1: column(s) {extra} are not options of {poll.file} (field {field})")
    personas = poll.persona_sets[name].personas
    reference: Reference = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        cells = dict(zip(header, (cell.strip() for cell in row), strict=False))
        persona = cells.get(PERSONA_COLUMN, "")
        if persona not in personas or persona in reference:
            why = "appears twice" if persona in reference else f"is not one of persona_sets.{name}.personas"
            raise ConfigError(f"{path}: line {line}: persona {persona!r} {why} (field {field})")
        reference[persona] = _shares(cells, poll, f"{path}: line {line}: persona {persona!r}", field)
    return reference


def _shares(cells: dict[str, str], poll: PollSpec, where: str, field: str) -> dict[str, float]:
    values = {}
    for option in poll.options:
        try:
            value = float(cells.get(option, ""))
        except ValueError:
            raise ConfigError(f"{where}: {option}: {cells.get(option)!r} is not a number (field {field})") from None
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{where}: {option}: {value} is not a non-negative number (field {field})")
        values[option] = value
    total = sum(values.values())
    if not total > 0:
        raise ConfigError(f"{where}: the reference distribution sums to {total}, not a positive number (field {field})")
    return {option: value / total for option, value in values.items()}


def read_poll(path: Path) -> PollSpec:
    """The poll file at ``path``, checked, with every reference CSV read (module docstring)."""
    raw = read_yaml_mapping(path)
    if "file" in raw:
        raise ConfigError(f"{path}: file: set by the reader, not declared")
    poll = validated(PollSpec, {**raw, "file": str(path)}, str(path))
    sets = {}
    for name, persona_set in poll.persona_sets.items():
        reference: Any = persona_set.reference
        if isinstance(reference, str):
            reference = read_reference(path.parent / reference, poll, name, f"persona_sets.{name}.reference")
        sets[name] = persona_set.model_copy(update={"reference": reference})
    return poll.model_copy(update={"persona_sets": sets})
