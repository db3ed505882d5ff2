"""Multiple choice in a chat: the choices listed as letters, the reply read for the one it names.

The chat variant of the multiple-choice kind (``kinds/choices.py``): a ``LetteredChoice`` asks
a ``ChoiceBenchmark``'s items as one chat message each, ``<item_id>:chat``, its template shown
the item's ``context`` fields and ``options``, the (letter, choice) pairs. Its ``read`` says
which choice a reply names (a letter in many shapes, else a choice's text), never raising; the
benchmark's ``answered`` judges that choice. An item without a reply is ``missing_response``, a
failed request ``engine_error``, a reply naming no choice ``unparsed_<reason>`` (not scored, the
reply kept in the detail; counted by ``unread_metric`` where the task declares one). Every reply
is checked for a refusal in its ``language`` (``refusals``).

A reading is a declared choice: where the benchmark's own reader (``official``) and ours (``read``)
may read a reply differently, every judgment keeps both, ``detail.readings`` = ``{"official": letter,
"themis": letter}`` (None: no choice read), and the task's ``reading`` parameter (``ReadingParams``)
names the one its outcome, score and metrics follow (``detail.reading``). The analyst view
``reading_disagreements`` lists the replies the two read differently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import Field

from themis_dagster.kinds.choices import ChoiceTask
from themis_dagster.refusals import mark_refusals, replies_by
from themis_dagster.tasks.rendering import render, template_sha256, template_text
from themis_dagster.tasks.scoring import rate_metric
from themis_dagster.tasks.spec import Item, Judgment, MetricValue, Request, Response, TaskParams

ReadingName = Literal["official", "themis"]


class Reading(Protocol):
    """What a reader found in a reply: the chosen choice's index, or None with ``reason``; ``how``: the rule."""

    @property
    def index(self) -> int | None: ...

    @property
    def reason(self) -> str: ...

    @property
    def how(self) -> str: ...


Reader = Callable[[Response, list[str], Item, Any], Reading]
"""Reads which of the item's choices (in letter order) a reply names: ``(response, choices, item, params)``."""


class ReadingParams(TaskParams):
    """The parameter of a task whose benchmark has its own reader: which reading its metrics use."""

    reading: ReadingName = Field(
        default="official",
        description="Which reading of each reply the outcome and metrics use: 'official' (the benchmark's own "
        "reader) or 'themis' (the project's); both are kept in every judgment's detail.",
    )


@dataclass(frozen=True, kw_only=True)
class LetteredChoice(ChoiceTask):
    """Asked in a chat with the choices as ``letters``; the reply read by ``read``.

    ``language``: the replies' language for the refusal detector, or a function of the item and
    params; ``record_errors``: an engine error's message kept in its judgment's detail;
    ``unread_metric``: the name under which the share of replies naming no choice is reported
    after the benchmark's metrics (None: the benchmark's metrics report it themselves, or not);
    ``official``: the benchmark's own reader, read beside ``read`` (its ``Params`` then declare
    ``reading``, ``ReadingParams``).
    """

    read: Reader
    official: Reader | None = None
    letters: str = "ABC"
    language: str | Callable[[Item, Any], str] = "en"
    record_errors: bool = False
    unread_metric: str | None = None

    def __post_init__(self) -> None:
        if self.official is not None and "reading" not in self.Params.model_fields:
            raise TypeError(f"{self.Params.__name__}: an official reader needs 'reading' (ReadingParams)")

    def build_requests(self, items: list[Item], params: Any, templates: dict[str, str]) -> list[Request]:
        """One chat request per item, ``<item_id>:chat``, its choices as ``options``."""
        gen_params = params.generation.model_dump(mode="json")
        digests: dict[str, str] = {}
        requests = []
        for item in items:
            template = self.template(item, params)
            options = list(zip(self.letters, self.choices_of(item, params), strict=True))
            content = render(templates, template, **self.shown(item), options=options)
            if template not in digests:
                digests[template] = template_sha256(template_text(templates, template))
            request_id = f"{item.item_id}:chat"
            digest = digests[template]
            requests.append(Request.user_message(content, request_id, item.item_id, template, digest, gen_params))
        return requests

    def judge(
        self, items: list[Item], requests: list[Request], responses: list[Response], params: Any
    ) -> list[Judgment]:
        """Per item: the choice its reply names, or why none could be read; and whether the reply refused."""
        by_id = {response.request_id: response for response in responses}
        judgments: list[Judgment] = []
        for item in items:
            response = by_id.get(f"{item.item_id}:chat")
            if response is None or response.error is not None:
                judgments.append(self._unanswered(item, response))
                continue
            reading, readings = self._reading(response, self.choices_of(item, params), item, params)
            extra = {"parse_rule": reading.how, "reply": (response.text or "")[:300]} | readings
            if reading.index is None:
                detail = self.benchmark.detail(item) | extra
                judgments.append(Judgment(item.item_id, item.subset, f"unparsed_{reading.reason}", None, False, detail))
            else:
                judgments.append(self.benchmark.answered(item, reading.index, extra))
        return self._mark_refusals(judgments, items, responses, params)

    def _reading(
        self, response: Response, choices: list[str], item: Item, params: Any
    ) -> tuple[Reading, dict[str, Any]]:
        """The reading the task uses, and (with an official reader) both readings and which is used, for the detail."""
        themis = self.read(response, choices, item, params)
        if self.official is None:
            return themis, {}
        official = self.official(response, choices, item, params)
        letters = {"official": self._letter(official), "themis": self._letter(themis)}
        used = official if params.reading == "official" else themis
        return used, {"reading": params.reading, "readings": letters}

    def _letter(self, reading: Reading) -> str | None:
        return None if reading.index is None else self.letters[reading.index]

    def _unanswered(self, item: Item, response: Response | None) -> Judgment:
        """``missing_response`` (no reply) or ``engine_error`` (a failed request)."""
        detail = self.benchmark.detail(item)
        if response is None:
            return Judgment(item.item_id, item.subset, "missing_response", None, False, detail)
        if self.record_errors:
            detail |= {"error": str(response.error)[:500]}
        return Judgment(item.item_id, item.subset, "engine_error", None, False, detail)

    def _mark_refusals(
        self, judgments: list[Judgment], items: list[Item], responses: list[Response], params: Any
    ) -> list[Judgment]:
        replies = replies_by(responses)
        if isinstance(self.language, str):
            return mark_refusals(judgments, replies, self.language)
        language = self.language
        languages = {item.item_id: language(item, params) for item in items}
        return [mark_refusals([judgment], replies, languages[judgment.item_id])[0] for judgment in judgments]

    def compute_metrics(self, judgments: list[Judgment], params: Any) -> list[MetricValue]:
        """The benchmark's metrics over the judgments, then ``unread_metric`` where declared."""
        rows = self.benchmark.compute_metrics(judgments, params)
        if self.unread_metric is None:
            return rows
        return rows + rate_metric(self.unread_metric, judgments, lambda j: not j.parsed, params)
