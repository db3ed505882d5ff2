"""An item's answer options with the chosen, correct and stereotyped ones marked, and a judge's exchanges.

Read from what the warehouse keeps, in the benchmark's own words: a loglikelihood item's options
are its requests (each continuation with its logprob, the shared context once), a chat item's the
``answers``/``choices`` of its fields. The marks come from the task's record of the judgment
(``judgments.detail``) where it says them, never guessed from names of tasks:

- an option index: ``prediction`` (chosen), ``label`` (correct), ``biased_loc`` (stereotyped: BBQ's
  biased answer for the question's polarity);
- an option text: ``predicted`` (chosen), ``referent`` (correct), and with ``stereotype`` pro/anti
  the referent or the ``other`` (stereotyped; WinoBias);
- a request named ``more`` or ``stereotype`` (CrowS-Pairs' sent_more, StereoSet's stereotype) is the
  answer the metric counts as stereotyped;
- otherwise the chosen option of a loglikelihood item is the one with the highest logprob.

A judge model's verdicts are in the detail as ``<question>`` (its label), ``<question>_reply`` and
``<question>_status``, with ``judge_model`` naming the judge (BOLD's regard and toxicity).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from themis_dagster.warehouse.read.drilldown import JudgedItem

LETTERS = "ABCDEFGHIJ"
STEREOTYPED_NAMES = ("more", "stereotype")


@dataclass(frozen=True)
class Option:
    """One answer an item offered, with its logprob (loglikelihood items) and what it was."""

    key: str
    text: str
    logprob: float | None
    chosen: bool = False
    correct: bool = False
    stereotyped: bool = False


def _index(detail: dict[str, Any], key: str) -> int | None:
    value = detail.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _same(a: str, b: object) -> bool:
    return isinstance(b, str) and a.strip().lower() == b.strip().lower()


def shared_context(item: JudgedItem) -> str | None:
    """The context every loglikelihood request of the item shares (shown once), or None."""
    contexts = {r.context for r in item.requests if r.request_type == "loglikelihood"}
    return next(iter(contexts)) if len(contexts) == 1 else None


def _raw_options(item: JudgedItem) -> list[Option]:
    scored = [r for r in item.requests if r.request_type == "loglikelihood"]
    if scored:
        prefix = f"{item.item_id}:"
        return [
            Option(r.request_id.removeprefix(prefix), r.continuation or "", r.logprob)
            for r in sorted(scored, key=lambda r: r.request_id)
        ]
    texts = item.fields.get("answers") or item.fields.get("choices")
    if isinstance(texts, list) and texts and all(isinstance(t, str) for t in texts):
        scores = item.detail.get("loglikelihoods")
        numbers = scores if isinstance(scores, list) and len(scores) == len(texts) else [None] * len(texts)
        return [Option(LETTERS[i] if i < len(LETTERS) else str(i), t, numbers[i]) for i, t in enumerate(texts)]
    return []


def options(item: JudgedItem) -> list[Option]:
    """The item's options with the marks its judgment's detail gives (see the module's docstring); [] when the
    item offered none (a free reply)."""
    found = _raw_options(item)
    if not found:
        return []
    detail = item.detail
    chosen, correct, biased = _index(detail, "prediction"), _index(detail, "label"), _index(detail, "biased_loc")
    if correct is None and isinstance(item.fields.get("label"), int) and not isinstance(item.fields["label"], bool):
        correct = int(item.fields["label"])
    referent, other = detail.get("referent", item.fields.get("referent")), detail.get("other", item.fields.get("other"))
    stereotype = detail.get("stereotype", item.fields.get("stereotype"))
    stereotyped_text = referent if stereotype == "pro" else other if stereotype == "anti" else None
    marked = []
    for i, option in enumerate(found):
        marked.append(
            Option(
                option.key,
                option.text,
                option.logprob,
                chosen=chosen == i if chosen is not None else _same(option.text, detail.get("predicted")),
                correct=correct == i if correct is not None else _same(option.text, referent),
                stereotyped=(biased == i)
                if biased is not None
                else (option.key in STEREOTYPED_NAMES or _same(option.text, stereotyped_text)),
            )
        )
    if not any(o.chosen for o in marked) and all(o.logprob is not None for o in marked) and len(marked) > 1:
        best = max(range(len(marked)), key=lambda i: marked[i].logprob or float("-inf"))
        marked[best] = Option(**{**marked[best].__dict__, "chosen": True})
    return marked


@dataclass(frozen=True)
class JudgeExchange:
    """A judge model's answer to one question about the item's reply: its reply, the label read from it and the
    status (judged, unreadable judge answer, ...)."""

    judge: str
    question: str
    reply: str | None
    verdict: str | None
    status: str | None


def judge_exchanges(item: JudgedItem) -> list[JudgeExchange]:
    """Every question a judge model was asked about this item's reply (empty: no judge model was asked)."""
    detail = item.detail
    judge = detail.get("judge_model")
    if not isinstance(judge, str):
        return []
    questions = sorted(
        key.removesuffix("_reply")
        for key in detail
        if key.endswith("_reply") and f"{key.removesuffix('_reply')}_status" in detail
    )
    return [
        JudgeExchange(judge, q, detail.get(f"{q}_reply"), detail.get(q), detail.get(f"{q}_status")) for q in questions
    ]
