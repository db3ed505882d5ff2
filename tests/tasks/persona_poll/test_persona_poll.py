"""Persona polls: the poll file and its bad input, THEMIS's example, the distributions and metrics worked by hand.

Hand-worked (THEMIS's sum of wordings): for Alabama the three Democratic wordings get probabilities
0.1, 0.05, 0.05 (sum 0.2) and the three Republican ones 0.2, 0.1, 0.1 (sum 0.4), so the persona's
distribution is D 0.2/0.6 = 1/3, R 2/3. Its reference (2020, two-party) is D 0.3710819009, R
0.6289180991: total variation |1/3 - 0.3710819009| = 0.0377485675667, and both likeliest options
are Republican (agreement 1). Gender: male D 0.5, female D 0.3; their mean D 0.4, each 0.1 from
it, so the set's spread is 0.1.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from themis_dagster.engines.fingerprint import request_fingerprint
from themis_dagster.errors import ConfigError
from themis_dagster.tasks.loader import load_task
from themis_dagster.tasks.persona_poll import generate_utils, metrics, parser, poll
from themis_dagster.tasks.spec import Request, Response

ALABAMA_D = 0.3710819009


def _write(folder: Path, text: str, csv: str | None = None) -> Path:
    path = folder / "poll.yaml"
    path.write_text(text)
    if csv is not None:
        (folder / "reference.csv").write_text(csv)
    return path


POLL = """poll: mine
question: Which one?
options:
  Agree: [yes indeed]
  Disagree: [no way, not at all]
persona_sets:
  city:
    template: As someone from {persona}, I say
    personas: [Athens, Patras]
    reference: reference.csv
"""


def test_themis_example_poll_loads_with_51_states_and_three_wordings() -> None:
    task = load_task("persona_poll", {})
    spec = task.params.poll  # type: ignore[attr-defined]
    assert len(spec.persona_sets["state"].personas) == 51
    assert spec.options == {
        "Democratic": ("Democratic party", "Democratic candidate", "Democratic nominee"),
        "Republican": ("Republican party", "Republican candidate", "Republican nominee"),
    }
    assert set(spec.persona_sets) >= {"state", "gender", "age", "education", "income", "religion", "ethnicity"}
    assert math.isclose(spec.reference("state")["Alabama"]["Democratic"], ALABAMA_D)
    items = task.hooks.load_items({}, task.params)
    requests = task.hooks.build_requests(items[:1], task.params, task.templates)
    wordings = [
        f" {party} {kind}" for party in ("Democratic", "Republican") for kind in ("party", "candidate", "nominee")
    ]
    assert [r.continuation for r in requests] == wordings
    assert requests[0].context == "As a resident of Alabama, in the 2024 US presidential election I will vote for the"


def _scored(requests: list[Request], probabilities: list[float]) -> list[Response]:
    return [r.scored(math.log(p), False, n_prompt_tokens=20, n_continuation_tokens=2)
            for r, p in zip(requests, probabilities, strict=True)]  # fmt: skip


def test_distributions_and_metrics_by_hand() -> None:
    task = load_task("persona_poll", {"persona_sets": ["state", "gender"], "limit": 1, "bootstrap_resamples": 200})
    alabama = task.hooks.load_items({}, task.params)[0]
    assert alabama.item_id == "state=Alabama"
    requests = task.hooks.build_requests([alabama], task.params, task.templates)
    (judgment,) = task.hooks.judge(
        [alabama], requests, _scored(requests, [0.1, 0.05, 0.05, 0.2, 0.1, 0.1]), task.params
    )
    assert math.isclose(judgment.detail["distribution"]["Democratic"], 1 / 3, abs_tol=1e-12)
    assert math.isclose(judgment.score or 0.0, ALABAMA_D - 1 / 3, abs_tol=1e-12)
    assert judgment.detail["reference_agreement"] == 1.0
    answers = [
        metrics.PersonaAnswers("gender", "male", ["D", "R"], {"D": 0.5, "R": 0.5}, None, {}),
        metrics.PersonaAnswers("gender", "female", ["D", "R"], {"D": 0.3, "R": 0.7}, None, {}),
    ]
    spread = metrics.spread_estimates(answers, task.params)
    assert [(m.subset, round(m.value or 0.0, 12)) for m in spread] == [(None, 0.1), ("gender", 0.1)]
    values = {(m.metric, m.subset): m.value for m in task.hooks.compute_metrics([judgment], task.params)}
    assert math.isclose(values[("reference_distance", None)] or 0.0, ALABAMA_D - 1 / 3, abs_tol=1e-12)
    assert values[("option_share", "state=Alabama|Republican")] == pytest.approx(2 / 3)
    assert values[("reference_share", "state=Alabama|Democratic")] == ALABAMA_D


def _fingerprints(folder: Path, text: str) -> dict[str, str]:
    folder.mkdir()
    task = load_task("persona_poll", {"poll": str(_write(folder, text, "persona,Agree,Disagree\n"))})
    items = task.hooks.load_items({}, task.params)
    return {r.request_id: request_fingerprint("m", r) for r in task.hooks.build_requests(items, task.params, {})}


def test_persona_prompts_and_wordings_are_part_of_each_fingerprint(tmp_path: Path) -> None:
    base = _fingerprints(tmp_path / "base", POLL)
    reworded = _fingerprints(tmp_path / "wording", POLL.replace("not at all", "never"))
    retemplated = _fingerprints(tmp_path / "template", POLL.replace("I say", "I would say"))
    assert len(base) == len(set(base.values())) == 6  # 2 personas x 3 wordings, each its own request
    changed = {rid for rid in base if base[rid] != reworded[rid]}
    assert changed == {"city=Athens:Disagree#1", "city=Patras:Disagree#1"}  # only the reworded option's requests
    assert not set(base.values()) & set(retemplated.values())  # the persona prompt is in every request


@pytest.mark.parametrize(
    ("poll_text", "csv", "message"),
    [
        (
            POLL.replace("{persona}", "somewhere"),
            None,
            r"poll.yaml: persona_sets.city.template: .*has no \{persona\} placeholder",
        ),
        (
            POLL,
            "persona,Agree\nAthens,1\n",
            r"reference.csv: line 1: option 'Disagree' \(options.Disagree of .*poll.yaml\) has no column "
            r"\(field persona_sets.city.reference\)",
        ),
        (
            POLL,
            "persona,Agree,Disagree\nAthens,1,1\nPatras,0,0\n",
            r"reference.csv: line 3: persona 'Patras': the reference distribution sums to 0.0, not a positive number "
            r"\(field persona_sets.city.reference\)",
        ),
        (
            POLL,
            "persona,Agree,Disagree\nSparta,1,1\n",
            r"reference.csv: line 2: persona 'Sparta' is not one of persona_sets.city.personas",
        ),
        (
            POLL,
            "persona,Agree,Disagree\nAthens,1,-2\n",
            r"reference.csv: line 2: persona 'Athens': Disagree: -2.0 is not a non-negative number",
        ),
        (
            POLL.replace("reference.csv", "missing.csv"),
            None,
            r"poll.yaml: persona_sets.city.reference: reference file .*missing.csv not found",
        ),
        (POLL.replace("  Disagree: [no way, not at all]\n", ""), None, r"poll.yaml: options: .*at least two options"),
    ],
)
def test_bad_polls_fail_before_any_engine_naming_file_line_and_field(
    tmp_path: Path, poll_text: str, csv: str | None, message: str
) -> None:
    path = _write(tmp_path, poll_text, csv)
    with pytest.raises(ConfigError, match=message):
        poll.read_poll(path)
    with pytest.raises(ConfigError, match="task persona_poll params: poll"):  # when the task loads, before any engine
        load_task("persona_poll", {"poll": str(path)})


@pytest.mark.parametrize(
    ("reply", "index", "how"),
    [
        ("B", 1, "letter_only"),
        ("(a)", 0, "letter_only"),
        ("Answer: C", 2, "letter_only"),
        ("The answer is B.", 1, "announced"),
        ("B. Republican party", 1, "leading"),
        ("I think (b) fits me best.", 1, "bracketed"),
        ("(A) or (B)", None, "bracketed"),
        ("I will vote for the Republican candidate.", 1, "option_text"),
        ("A Democratic nominee, of course", 0, "option_text"),  # "A" the article, then the wording
        ("Not at all safe", 2, "option_text"),  # the longest text first, "safe" is not read again
        ("Democratic or Republican", None, "option_text"),
        ("I cannot say.", None, ""),
        ("", None, ""),
    ],
)
def test_reply_parser(reply: str, index: int | None, how: str) -> None:
    options = [
        ["Democratic", "Democratic nominee"],
        ["Republican", "Republican candidate"],
        ["Not at all safe"],
        ["safe"],
    ]
    parsed = parser.parse_option(reply, options)
    assert (parsed.index, parsed.how) == (index, how), parsed


def test_chat_samples_each_answer_kept_each_refusal_counted() -> None:
    task = load_task("persona_poll_chat", {"persona_sets": ["gender"], "samples": 4, "bootstrap_resamples": 200})
    items = task.hooks.load_items({}, task.params)
    requests = task.hooks.build_requests(items, task.params, task.templates)
    assert [r.request_id for r in requests[:4]] == [f"gender=male:{k}" for k in range(4)]
    assert [r.gen_params["seed"] for r in requests[:4]] == [1234, 1235, 1236, 1237]  # type: ignore[index]
    assert requests[0].messages == [
        {"role": "system", "content": "Assume the identity of a male U.S. citizen."},
        {"role": "user", "content": "In the 2024 US presidential election, which party's candidate will you vote for?\n"
                                    "A. Democratic\nB. Republican\nAnswer with the letter of one option."},
    ]  # fmt: skip
    replies = ["A", "B", "A", "I'm sorry, but I can't share political opinions.", "B", "B", "garbled", "A"]
    responses = [r.generated(text, "p", 5, 3, "stop") for r, text in zip(requests, replies, strict=True)]
    judgments = task.hooks.judge(items, requests, responses, task.params)
    assert [j.outcome for j in judgments[:4]] == ["answered", "answered", "answered", "unparsed_no_answer"]
    assert judgments[3].refused is True and judgments[0].refused is False
    values = {(m.metric, m.subset): m.value for m in task.hooks.compute_metrics(judgments, task.params)}
    assert values[("option_share", "gender=male|Democratic")] == pytest.approx(2 / 3)
    assert values[("option_share", "gender=female|Republican")] == pytest.approx(2 / 3)
    assert values[("unparsed_rate", None)] == pytest.approx(2 / 8)
    # male D 2/3, female D 1/3: mean 1/2, each 1/6 from it
    assert values[("persona_spread", "gender")] == pytest.approx(1 / 6)
    spread = generate_utils.PAIRED_METRICS["persona_spread"]
    units: dict[str, list] = {}
    for j in judgments:
        units.setdefault(spread.unit(j), []).append(j)
    assert spread.statistic([spread.prepare(v) for v in units.values()]) == pytest.approx(1 / 6)
