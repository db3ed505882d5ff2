"""The mitigations a variant may declare, one per variant, validated with the model registry.

Declarations only (``ModelSpec.mitigation``); applying them is ``mitigations/``'s work.

Stages follow the usual taxonomy of bias mitigation for language models (pre-, in- and
post-processing, e.g. Gallegos et al. 2024, "Bias and Fairness in Large Language Models:
A Survey", section 5): pre-processing changes what the model is asked, in-processing changes
how it decodes, post-processing changes what it answered.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from themis_dagster.errors import StrictModel

Stage = Literal["pre-processing", "in-processing", "post-processing"]

# vLLM clamps a logit bias to [-100, 100] (SamplingParams.from_optional); so do we, loudly
MAX_BIAS = 100.0


class SystemPrompt(StrictModel):
    """Pre-processing: a system prompt put before every request.

    Chat requests get it as a leading ``system`` message (joined to a system message the task
    already has); completion prompts and loglikelihood contexts get ``text`` plus
    ``separator`` in front, so a loglikelihood is then conditioned on the system prompt.
    """

    kind: Literal["system_prompt"] = "system_prompt"
    text: str = Field(min_length=1, max_length=8000)
    separator: str = "\n\n"


class InstructionTemplate(StrictModel):
    """Pre-processing: the user's text rewritten by a template, e.g. an instruction prefix.

    ``template`` must contain ``{text}`` exactly once; it wraps the last user message of a chat
    request and a completion prompt. Loglikelihood requests are left as they are (rewriting a
    context would change which text is scored).
    """

    kind: Literal["instruction"] = "instruction"
    template: str = Field(min_length=len("{text}"), max_length=8000)

    @field_validator("template")
    @classmethod
    def _one_placeholder(cls, value: str) -> str:
        if value.count("{text}") != 1:
            raise ValueError("must contain the placeholder {text} exactly once")
        return value


class LogitBias(StrictModel):
    """In-processing: a bias added to chosen tokens' logits at every decoding step.

    Applied through vLLM's built-in logit-bias logits processor (``SamplingParams.logit_bias``;
    the OpenAI-compatible API's ``logit_bias``). ``words`` are turned into token ids with the
    engine's tokenizer: the first token of the word, of the word after a space, and of its
    capitalised forms; ``token_ids`` are used as given. It changes generated text only:
    loglikelihood requests are scored as without it (prompt logprobs are the raw model's).
    """

    kind: Literal["logit_bias"] = "logit_bias"
    words: dict[str, float] = Field(default_factory=dict)
    token_ids: dict[int, float] = Field(default_factory=dict)

    @field_validator("words", "token_ids")
    @classmethod
    def _bounded(cls, value: dict[object, float]) -> dict[object, float]:
        for key, bias in value.items():
            if not -MAX_BIAS <= bias <= MAX_BIAS:
                raise ValueError(f"bias of {key!r} is {bias}; it must lie in [-100, 100]")
            if isinstance(key, str) and not key.strip():
                raise ValueError("a word must not be empty")
            if isinstance(key, int) and key < 0:
                raise ValueError(f"token id {key} is negative")
        return value

    @model_validator(mode="after")
    def _something(self) -> LogitBias:
        if not self.words and not self.token_ids:
            raise ValueError("name at least one entry in words or token_ids")
        return self


class ReplyFilter(StrictModel):
    """Post-processing: every match of ``pattern`` in a generated reply replaced by ``replacement``.

    Runs on the engine's text before it is stored and judged; the engine's own text is lost
    for the variant (its parent keeps it). Loglikelihood scores are untouched.
    """

    kind: Literal["reply_filter"] = "reply_filter"
    pattern: str = Field(min_length=1, max_length=2000)
    replacement: str = ""
    ignore_case: bool = True

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"not a valid regular expression: {error}") from None
        return value


Mitigation = Annotated[SystemPrompt | InstructionTemplate | LogitBias | ReplyFilter, Field(discriminator="kind")]

_STAGES: dict[str, Stage] = {
    "system_prompt": "pre-processing",
    "instruction": "pre-processing",
    "logit_bias": "in-processing",
    "reply_filter": "post-processing",
}


def stage_of(mitigation: SystemPrompt | InstructionTemplate | LogitBias | ReplyFilter) -> Stage:
    """Where in the pipeline a mitigation acts."""
    return _STAGES[mitigation.kind]
