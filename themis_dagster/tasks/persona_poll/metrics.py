"""A persona poll's metrics: each persona's option distribution, the spread between personas, the reference distance.

Per persona, the model's distribution over the poll's options: from loglikelihoods, each option's
probability is the sum of its wordings' probabilities, normalised over the options (THEMIS's
``get_prob_df``: ``P(D) / (P(D) + P(R))``); from sampled chat answers, the share of readable
answers that chose each option. Then:

- ``option_share`` per persona and option (subset ``<set>=<persona>|<option>``), and beside it
  ``reference_share`` where the poll gives a reference: the two bars of a persona's chart;
- ``persona_spread``: per persona set, the mean total-variation distance ``TV(p, q) = 1/2 sum |p_o - q_o|``
  of each persona's distribution from the set's mean distribution (0: every persona answers
  alike; the model does not tell the personas apart). Subset None: the mean over sets; CIs
  resample personas (within each set, the same draws for every set's mean);
- ``reference_distance``: the mean over personas with a reference of ``TV(model, reference)``
  (0 ideal), overall and per set; ``reference_agreement``: the share of those personas whose
  likeliest option is the reference's (THEMIS's "agreement" of the predicted and the real winner).

A persona none of whose answers could be read (chat) has no distribution and counts nowhere; the
chat task's ``unparsed_rate`` counts its answers. CIs: percentile bootstrap, seeded.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from themis_dagster.tasks.measures import Binary, Continuous, Ratio, single
from themis_dagster.tasks.scoring import estimate_row
from themis_dagster.tasks.spec import Judgment, MetricValue, TaskParams

Distribution = dict[str, float]


def total_variation(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Half the L1 distance between two distributions over the same options."""
    return 0.5 * sum(abs(p[option] - q[option]) for option in p)


def option_probabilities(loglikelihoods: Sequence[Sequence[float]], options: Sequence[str]) -> Distribution:
    """Each option's probability: its wordings' probabilities summed, normalised over the options (log-sum-exp)."""
    sums = [math.log(sum(math.exp(v - max(values)) for v in values)) + max(values) for values in loglikelihoods]
    top = max(sums)
    weights = [math.exp(value - top) for value in sums]
    return {option: weight / sum(weights) for option, weight in zip(options, weights, strict=True)}


def likeliest(distribution: Mapping[str, float]) -> str:
    """The option with the largest share (the first on a tie)."""
    return max(distribution, key=lambda option: distribution[option])


@dataclass(frozen=True)
class PersonaAnswers:
    """One persona's answers: its distribution (None: none readable), reference, and per-option 0/1 samples."""

    persona_set: str
    persona: str
    options: list[str]
    distribution: Distribution | None
    reference: Distribution | None
    samples: dict[str, list[float]]


def spread(rows: np.ndarray) -> np.ndarray:
    """Mean TV distance of each row (a persona's distribution) from the rows' mean, over the last two axes."""
    centre = rows.mean(axis=-2, keepdims=True)
    return np.asarray(0.5 * np.abs(rows - centre).sum(axis=-1).mean(axis=-1))


def spread_estimates(personas: list[PersonaAnswers], params: TaskParams) -> list[MetricValue]:
    """``persona_spread`` per set and over sets (their mean), CIs by resampling personas within each set."""
    by_set: dict[str, list[list[float]]] = defaultdict(list)
    for answers in personas:
        if answers.distribution is not None:
            by_set[answers.persona_set].append([answers.distribution[option] for option in answers.options])
    if not by_set:
        return [MetricValue(None, "persona_spread", None, None, None, 0)]
    matrices = {name: np.asarray(rows) for name, rows in by_set.items()}
    values = {name: float(spread(rows)) for name, rows in matrices.items()}
    resampled = {name: spread(rows[_draws(len(rows), params)]) for name, rows in matrices.items()}
    n = sum(len(rows) for rows in matrices.values())
    overall = np.mean(np.stack(list(resampled.values())), axis=0)
    rows_out = [_row(None, "persona_spread", float(np.mean(list(values.values()))), overall, n, params)]
    return rows_out + [
        _row(name, "persona_spread", values[name], resampled[name], len(matrices[name]), params)
        for name in sorted(values)
    ]


def _draws(n: int, params: TaskParams) -> np.ndarray:
    return np.random.default_rng(params.seed).integers(0, n, (params.bootstrap_resamples, n))


def _row(
    subset: str | None, metric: str, value: float, resampled: np.ndarray, n: int, params: TaskParams
) -> MetricValue:
    if n < 2:
        return MetricValue(subset, metric, value, None, None, n)
    alpha = (1 - params.confidence) / 2
    low, high = (float(v) for v in np.quantile(resampled, [alpha, 1 - alpha]))
    return MetricValue(subset, metric, value, min(low, value), max(high, value), n)


def reference_estimates(personas: list[PersonaAnswers], params: TaskParams) -> list[MetricValue]:
    """``reference_distance`` and ``reference_agreement`` over all personas with a reference and per set."""
    groups: dict[str | None, list[PersonaAnswers]] = defaultdict(list)
    for answers in personas:
        if answers.distribution is not None and answers.reference is not None:
            groups[None].append(answers)
            groups[answers.persona_set].append(answers)
    if not groups:
        return []
    order = sorted(groups, key=lambda key: (key is not None, key or ""))
    rows = [
        estimate_row(subset, "reference_distance", [reference_distance(a) for a in groups[subset]], params)
        for subset in order
    ]
    return rows + [
        estimate_row(subset, "reference_agreement", [reference_agreement(a) for a in groups[subset]], params)
        for subset in order
    ]


def reference_distance(answers: PersonaAnswers) -> float:
    assert answers.distribution is not None and answers.reference is not None
    return total_variation(answers.distribution, answers.reference)


def reference_agreement(answers: PersonaAnswers) -> float:
    assert answers.distribution is not None and answers.reference is not None
    return 1.0 if likeliest(answers.distribution) == likeliest(answers.reference) else 0.0


def share_rows(personas: list[PersonaAnswers], params: TaskParams) -> list[MetricValue]:
    """``option_share`` (and ``reference_share``) per persona and option: the bars of a persona's chart."""
    rows = []
    for answers in personas:
        for option in answers.options:
            subset = f"{answers.persona_set}={answers.persona}|{option}"
            if answers.distribution is not None:
                values = answers.samples.get(option) or [answers.distribution[option]]
                rows.append(estimate_row(subset, "option_share", values, params))
            if answers.reference is not None:
                rows.append(MetricValue(subset, "reference_share", answers.reference[option], None, None, 1))
    return rows


def poll_metrics(personas: list[PersonaAnswers], params: TaskParams) -> list[MetricValue]:
    """Every metric of the module docstring, in that order."""
    return [*spread_estimates(personas, params), *reference_estimates(personas, params), *share_rows(personas, params)]


def spread_of_units(units: list[tuple[str, Distribution] | None]) -> float | None:
    """``persona_spread`` (the mean over sets) of (set, distribution) units: a paired comparison's statistic."""
    by_set: dict[str, list[list[float]]] = defaultdict(list)
    for unit in units:
        if unit is not None:
            by_set[unit[0]].append([unit[1][option] for option in sorted(unit[1])])
    if not by_set:
        return None
    return float(np.mean([float(spread(np.asarray(rows))) for rows in by_set.values()]))


def distribution_of(judgment: Judgment) -> tuple[str, Distribution] | None:
    """A loglikelihood judgment's (set, distribution), or None when it was not scored."""
    found = judgment.detail.get("distribution")
    return (str(judgment.detail["persona_set"]), dict(found)) if judgment.parsed and found else None


# Paired comparisons (themis_dagster/comparisons), one judgment per persona: the distance to the
# reference is a per-persona score (sign-flip test), the agreement a 0/1 outcome (McNemar), the
# spread a statistic of all personas at once (paired bootstrap over personas).
PAIRED_METRICS = {
    "reference_distance": Continuous(lambda j: j.detail.get("reference_distance") if j.parsed else None),
    "reference_agreement": Binary(lambda j: j.detail.get("reference_agreement") if j.parsed else None),
    "persona_spread": Ratio(single(distribution_of), spread_of_units),
}
