"""Persona polls as sampled chat answers (task ``persona_poll_chat``): the poll's question asked K times per persona.

The system message is the set's ``chat_system`` with ``{persona}`` filled in; the user message is
``poll_chat`` (``persona_poll_templates.yaml``): the question and the options as lettered choices.
Each reply is read as one option (``parser.parse_option``, by letter or by any of the option's
wordings); the persona's distribution is the share of readable replies that chose each option
(``sampling.py``). Metrics as the loglikelihood task's, plus ``unparsed_rate``.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from themis_dagster.tasks.measures import Ratio, mean_of
from themis_dagster.tasks.persona_poll import data, metrics, sampling
from themis_dagster.tasks.persona_poll.data import load_items
from themis_dagster.tasks.persona_poll.metrics import PersonaAnswers
from themis_dagster.tasks.persona_poll.parser import letters
from themis_dagster.tasks.persona_poll.poll import fill
from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.scoring import rate_metric
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response

__all__ = ["PAIRED_METRICS", "Params", "build_requests", "compute_metrics", "judge", "load_items"]
TEMPLATE = "poll_chat"


class Params(data.Params):
    samples: int = Field(default=10, ge=1, le=1000, description="Sampled answers per persona.")


def messages_of(templates: dict[str, str]) -> Callable[[Item], tuple[str | None, str]]:
    def messages(item: Item) -> tuple[str | None, str]:
        options = list(zip(letters(len(item.fields["options"])), item.fields["options"], strict=True))
        user = render(templates, TEMPLATE, question=item.fields["question"], options=options)
        return fill(item.fields["chat_system"], item.fields["persona"]), user

    return messages


def build_requests(items: list[Item], params: Params, templates: dict[str, str]) -> list[Request]:
    """K chat requests per persona (``<set>=<persona>:<k>``), sample k seeded ``generation.seed + k``."""
    digest = template_sha256(template_text(templates, TEMPLATE))
    return sampling.sample_requests(items, params.samples, params.generation, messages_of(templates), TEMPLATE, digest)


def options_of(item: Item) -> list[list[str]]:
    """Each option's texts a reply may name: its name and its wordings."""
    return [
        [option, *wordings] for option, wordings in zip(item.fields["options"], item.fields["wordings"], strict=True)
    ]


def detail_of(item: Item) -> dict[str, object]:
    keys = ("poll", "persona_set", "persona", "options", "reference")
    return {key: item.fields[key] for key in keys}


def judge(items: list[Item], requests: list[Request], responses: list[Response], params: Params) -> list[Judgment]:
    """One judgment per sampled reply: the option it chose, or why none was read; refusals marked."""
    return sampling.judge_samples(items, responses, params.samples, options_of, detail_of)


def answers_of(judgments: list[Judgment]) -> list[PersonaAnswers]:
    """Each persona's sampled answers: its distribution over readable replies and each option's 0/1 samples."""
    found = []
    for samples in sampling.by_unit(judgments).values():
        first = samples[0].detail
        options = list(first["options"])
        counts = sampling.choice_counts(samples, len(options))
        read = sum(counts)
        chosen = [int(j.detail["choice"]) for j in samples if j.parsed and j.detail.get("choice") is not None]
        found.append(
            PersonaAnswers(
                str(first["persona_set"]),
                str(first["persona"]),
                options,
                {option: count / read for option, count in zip(options, counts, strict=True)} if read else None,
                first.get("reference"),
                {option: [1.0 if c == k else 0.0 for c in chosen] for k, option in enumerate(options)},
            )
        )
    return found


def compute_metrics(judgments: list[Judgment], params: Params) -> list[MetricValue]:
    """The poll's metrics over the personas' sampled answers, and the share of unreadable replies."""
    return metrics.poll_metrics(answers_of(judgments), params) + rate_metric(
        "unparsed_rate", judgments, lambda j: not j.parsed, params
    )


def _persona(judgments: list[Judgment]) -> PersonaAnswers | None:
    found = answers_of(judgments)
    return found[0] if len(found) == 1 and found[0].distribution is not None else None


def _distance(judgments: list[Judgment]) -> float | None:
    answers = _persona(judgments)
    return None if answers is None or answers.reference is None else metrics.reference_distance(answers)


def _agreement(judgments: list[Judgment]) -> float | None:
    answers = _persona(judgments)
    return None if answers is None or answers.reference is None else metrics.reference_agreement(answers)


def _set_distribution(judgments: list[Judgment]) -> tuple[str, metrics.Distribution] | None:
    answers = _persona(judgments)
    return None if answers is None or answers.distribution is None else (answers.persona_set, answers.distribution)


def _unit(judgment: Judgment) -> str:
    return str(judgment.detail["unit"])


# Paired comparisons: a persona's samples are one unit; each metric is a statistic over personas
# (paired bootstrap over personas).
PAIRED_METRICS = {
    "reference_distance": Ratio(_distance, mean_of, unit=_unit),
    "reference_agreement": Ratio(_agreement, mean_of, unit=_unit),
    "persona_spread": Ratio(_set_distribution, metrics.spread_of_units, unit=_unit),
}
