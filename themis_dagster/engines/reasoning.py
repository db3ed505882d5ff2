"""A reasoning model's reply split into reasoning and answer, and its reasoning budget on each chat request.

A model declared with ``reasoning:`` (``registry/models.py``'s ``ReasoningSpec``) thinks before
it answers. Its reply is split by vLLM's own reasoning parser for the declared name, never by a
pattern of ours:

- the in-process engine (``engines/vllm/engine.py``) and the fake engine instantiate the parser
  class with their tokenizer (``ReasoningSplitter.load``) and split every chat reply with the
  parser's non-streaming ``extract_reasoning(model_output, request)``;
- a ``vllm serve --reasoning-parser NAME`` endpoint and hosted providers split replies
  themselves and return the reasoning beside the answer (``reasoning_content`` or
  ``reasoning``): the OpenAI-compatible engine reads that field (``with_openai_reasoning``).

``Response.text`` is then the final answer only and ``Response.reasoning`` the thinking ("" where
a reasoning block was opened and never written in). A reply with reasoning and no answer never
finished reasoning within its budget: the judgments stage withholds it from the task's parser
(``evaluation/judging/reply_guard.py``).

The budget: ``budget_tokens`` is added to each chat request's ``max_tokens`` (the task's answer
budget), and ``chat_template_kwargs`` go to the chat template (``reasoning_params``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from themis_dagster.engines.base import AnswerSink, Engine
from themis_dagster.engines.wrapper import EngineWrapper
from themis_dagster.errors import ConfigError
from themis_dagster.exchange import GenerationParams, Request, Response
from themis_dagster.registry.models import ReasoningSpec

# A marker written as one special token (``<think>``, ``<|channel|>``); plain-text markers need no vocabulary entry.
_TOKEN_LIKE = re.compile(r"^<[^\s<>]+>$")


@dataclass(frozen=True)
class Split:
    """One reply, split: ``answer`` is what a task may read, ``reasoning`` what it may not."""

    reasoning: str | None
    answer: str
    n_reasoning_tokens: int | None


class ReasoningSplitter:
    """vLLM's reasoning parser of one model, instantiated with that model's tokenizer."""

    def __init__(self, parser: Any, tokenizer: Any, name: str) -> None:
        self.parser = parser
        self.tokenizer = tokenizer
        self.name = name

    @classmethod
    def load(cls, model_id: str, reasoning: ReasoningSpec, tokenizer: Any) -> ReasoningSplitter:
        """The parser ``reasoning.parser`` for this tokenizer; ConfigError naming the model where it cannot work.

        Checked when the engine's tokenizer is loaded, before any request: the parser must exist,
        accept the tokenizer, find its markers in the tokenizer's vocabulary, and split a complete
        reply (gpt-oss's parser only marks where reasoning ends; its replies are split by vLLM's
        server, through the Harmony format).
        """
        from vllm.reasoning import ReasoningParserManager

        name = reasoning.parser
        try:
            parser_class = ReasoningParserManager.get_reasoning_parser(name)
        except KeyError as error:
            raise ConfigError(f"model {model_id!r}: reasoning.parser: {error.args[0]}") from None
        try:  # the request of extract_reasoning(text, request) is the server's; none is sent here
            parser: Any = parser_class(tokenizer, chat_template_kwargs=dict(reasoning.chat_template_kwargs))
        except Exception as error:  # noqa: BLE001 - vLLM raises RuntimeError/ValueError for a tokenizer it cannot use
            raise ConfigError(
                f"model {model_id!r}: vLLM's reasoning parser {name!r} cannot work with this model's tokenizer: {error}"
            ) from None
        vocabulary = tokenizer.get_vocab()
        markers = [getattr(parser, "reasoning_start_str", None), getattr(parser, "reasoning_end_str", None)]
        missing = [m for m in markers if isinstance(m, str) and _TOKEN_LIKE.match(m) and m not in vocabulary]
        if missing:
            raise ConfigError(
                f"model {model_id!r}: its tokenizer lacks the reasoning markers {missing} of vLLM's "
                f"reasoning parser {name!r}"
            )
        try:
            parser.extract_reasoning("", None)
        except NotImplementedError as error:
            raise ConfigError(
                f"model {model_id!r}: vLLM's reasoning parser {name!r} does not split a complete reply here ({error}); "
                "serve the model with vLLM's server (THEMIS_ENGINE=vllm-server, or an api source), which splits it"
            ) from None
        return cls(parser, tokenizer, name)

    def split(self, text: str, token_ids: Sequence[int] | None = None) -> Split:
        """``text`` (a chat reply, special tokens kept) as reasoning and answer, with vLLM's parser.

        ``token_ids``: the reply's tokens, where the engine has them. A reply whose reasoning never
        ended and holds nothing (the template opened a block the model closed its turn in, or
        filled with nothing but markers) has reasoning "" rather than None, so it reads as
        unfinished (``evaluation/judging/reply_guard.py``).
        """
        reasoning, content = self.parser.extract_reasoning(text, None)
        answer = content or ""
        opened = token_ids is not None and not self.parser.is_reasoning_end(list(token_ids))
        if reasoning is None and not answer.strip() and opened:
            reasoning = ""
        n_tokens = None if reasoning is None else len(self.tokenizer.encode(reasoning, add_special_tokens=False))
        return Split(reasoning, answer, n_tokens)

    def split_response(self, response: Response, token_ids: Sequence[int] | None = None) -> Response:
        """``response`` with its text split (an engine error is left as it is)."""
        if response.error is not None or response.text is None:
            return response
        split = self.split(response.text, token_ids)
        return dataclasses.replace(
            response, text=split.answer, reasoning=split.reasoning, n_reasoning_tokens=split.n_reasoning_tokens
        )


def reasoning_params(params: GenerationParams, reasoning: ReasoningSpec) -> GenerationParams:
    """A chat request's sampling settings for a reasoning model: the reasoning budget on top of ``max_tokens``.

    ``chat_template_kwargs`` ride along as an attribute outside the declared fields (read with
    ``getattr``, as a mitigation's ``logit_bias`` is), so the settings keep their class.
    """
    update: dict[str, Any] = {"max_tokens": params.max_tokens + reasoning.budget_tokens}
    if reasoning.chat_template_kwargs:
        update["chat_template_kwargs"] = dict(reasoning.chat_template_kwargs)
    return params.model_copy(update=update)


# -- replies split elsewhere (vLLM's server, hosted providers) ----------------------------------


def with_openai_reasoning(response: Response, data: Any) -> Response:
    """``response`` with the reasoning an OpenAI-style chat completion ``data`` returned beside its answer.

    vLLM's server with ``--reasoning-parser`` (and DeepSeek's API) name the field
    ``reasoning_content``, newer vLLM releases and other providers ``reasoning``; the token count
    is ``usage.completion_tokens_details.reasoning_tokens`` where the server gives it.
    """
    message = data["choices"][0].get("message") or {}
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    if not isinstance(reasoning, str):
        return response
    details = (data.get("usage") or {}).get("completion_tokens_details") or {}
    tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
    n_tokens = int(tokens) if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    return dataclasses.replace(response, reasoning=reasoning, n_reasoning_tokens=n_tokens)


class ReasoningBudget(EngineWrapper):
    """An engine whose replies are split elsewhere (an OpenAI-compatible server), given a model's reasoning settings.

    Chat requests get the reasoning budget on top of their ``max_tokens`` and the chat template
    arguments (``reasoning_params``); everything else is the inner engine's (``EngineWrapper``).
    """

    def __init__(self, inner: Engine, reasoning: ReasoningSpec) -> None:
        super().__init__(inner, {"reasoning": reasoning.model_dump(mode="json")})
        self.reasoning = reasoning

    @property
    def applies_reasoning(self) -> bool:
        """The budget is applied here, the split by the server: wrapping this again would add the budget twice."""
        return True

    def chat(
        self, requests: Sequence[Request], params: GenerationParams, on_answered: AnswerSink | None = None
    ) -> list[Response]:
        return super().chat(requests, reasoning_params(params, self.reasoning), on_answered)


def with_reasoning_budget(engine: Engine, reasoning: ReasoningSpec | None) -> Engine:
    """``engine`` itself unless it is a reasoning model's and does not apply the settings itself.

    The in-process vLLM engine and the fake engine split replies and apply the budget themselves
    (``applies_reasoning``); engines over HTTP get ``ReasoningBudget`` around them.
    """
    if reasoning is None or engine.applies_reasoning:
        return engine
    return ReasoningBudget(engine, reasoning)
