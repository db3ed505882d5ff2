"""A persona poll's parameters and items: one item per persona of each persona set of the poll.

``poll`` is a poll file (``poll.py``; a path relative to this folder, or absolute) read and checked
when the parameters load, so a bad poll or reference CSV fails before any engine starts; the read
poll (with its reference distributions) is what the parameters hold and record, so a change to the
poll file is a change of parameters. ``persona_sets`` picks sets; ``limit`` keeps each set's first
N personas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from themis_dagster.tasks.persona_poll.poll import PollSpec, read_poll
from themis_dagster.tasks.spec import Item, TaskParams

FOLDER = Path(__file__).resolve().parent
EXAMPLE_POLL = "polls/us_elections_2024.yaml"


def poll_path(value: str) -> Path:
    """A poll file named in the parameters: absolute, or relative to this family's folder."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else FOLDER / path


class Params(TaskParams):
    poll: PollSpec = Field(description="The poll file (relative to tasks/persona_poll/ or absolute), read and checked.")
    persona_sets: list[str] | None = Field(default=None, min_length=1, description="Only these persona sets.")

    @field_validator("poll", mode="before")
    @classmethod
    def _read(cls, value: Any) -> Any:
        """A path is read as a poll file; a mapping (a recorded poll) is validated as it is."""
        if isinstance(value, str | Path):
            return read_poll(poll_path(str(value)))
        return value

    @field_validator("persona_sets")
    @classmethod
    def _no_repeats(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"persona_sets repeat a set: {value}")
        return value

    def chosen_sets(self) -> list[str]:
        """The persona sets asked, in the poll's order; an unknown name fails naming the known ones."""
        known = list(self.poll.persona_sets)
        unknown = [name for name in self.persona_sets or () if name not in known]
        if unknown:
            raise ValueError(f"persona_sets: {unknown} not in the poll {self.poll.poll!r}; its sets: {known}")
        return [name for name in known if self.persona_sets is None or name in self.persona_sets]


def item_id(persona_set: str, persona: str) -> str:
    return f"{persona_set}={persona}"


def load_items(files: dict[str, Path], params: Params) -> list[Item]:
    """One item per persona (``<set>=<persona>``), subset the persona set; the poll's parts each request needs."""
    poll = params.poll
    options = list(poll.options)
    items = []
    for name in params.chosen_sets():
        persona_set = poll.persona_sets[name]
        reference = poll.reference(name) or {}
        for persona in persona_set.personas[: params.limit]:
            fields = {
                "poll": poll.poll,
                "persona_set": name,
                "persona": persona,
                "template": persona_set.template,
                "chat_system": persona_set.chat_system,
                "question": poll.question,
                "options": options,
                "wordings": [list(poll.options[option]) for option in options],
                "delimiter": poll.delimiter,
                "reference": reference.get(persona),
            }
            items.append(Item(item_id(name, persona), name, fields))
    return items
