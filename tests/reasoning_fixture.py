"""A thinking model made from the default model (SmolLM2-135M-Instruct), for tests of reasoning models.

No reasoning model can be downloaded here, so the tests make one in seconds
(shared/notes/platform-facts.md): the default model's folder copied, its tokenizer given
``<think>`` and ``</think>`` as special tokens (embeddings resized), and its chat template's
generation prompt extended to open a think block after the assistant header. New embedding
rows as transformers initialises them make the model end its turn at once; instead ``<think>``
gets the newline token's row and ``</think>`` 1.02 times it (the model ties its head to its
embeddings), so the model writes a line of "reasoning", closes the block where a newline would
come, and answers. vLLM's ``qwen3`` parser handles a block the template opened (its replies
start inside the block) and drops stray closing markers in the answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.settings import Settings

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
PARSER = "qwen3"
GENERATION_PROMPT = "'<|im_start|>assistant\n'"  # the default model's template ends with this (a real newline)
THINKING_PROMPT = f"'<|im_start|>assistant\n{THINK_OPEN}'"
CLOSE_SCALE = 1.02  # </think>'s row: the newline's, scaled up a little so it wins where a newline would


def default_model_folder(settings: Settings | None = None) -> Path:
    """The default model's folder, prepared first where a fresh checkout has none (``themis models prepare``)."""
    from themis_dagster.registry.models import get_model, load_registry
    from themis_dagster.registry.weights import resolve_weights

    settings = settings or Settings.from_env()
    spec = get_model(load_registry(settings.models_file), DEFAULT_MODEL_ID)
    return Path(resolve_weights(spec, settings.models_dir, settings.cache_dir).path)


def build_thinking_model(target: Path, source: Path | None = None) -> Path:
    """Write the thinking fixture model into ``target`` (a new folder) from the default model's folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = source or default_model_folder()
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16)
    added = tokenizer.add_tokens([THINK_OPEN, THINK_CLOSE], special_tokens=True)
    assert added == 2, f"{source}: the tokenizer already has think markers"
    model.resize_token_embeddings(len(tokenizer))
    newline = tokenizer.encode("\n", add_special_tokens=False)
    assert len(newline) == 1, "the default model's newline is one token"
    rows: Any = model.get_input_embeddings().weight  # tied: the head's rows too
    with torch.no_grad():
        rows[tokenizer.convert_tokens_to_ids(THINK_OPEN)] = rows[newline[0]]
        rows[tokenizer.convert_tokens_to_ids(THINK_CLOSE)] = rows[newline[0]] * CLOSE_SCALE
    template = (source / "chat_template.jinja").read_text()
    assert GENERATION_PROMPT in template, "the default model's chat template changed"
    tokenizer.chat_template = template.replace(GENERATION_PROMPT, THINKING_PROMPT)
    target.mkdir(parents=True, exist_ok=False)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    (target / "chat_template.jinja").write_text(tokenizer.chat_template)
    return target


def thinking_model_entry(model_id: str, folder: Path, budget_tokens: int, **fields: Any) -> dict[str, Any]:
    """A registry entry for the fixture: a local model declaring ``reasoning`` with vLLM's ``qwen3`` parser.

    Its dtype is the platform's choice for this CPU (``auto``): bf16 where the CPU computes it, float32
    where it would be emulated (pinned to bf16, the reasoning tests ran 8 times slower on the AVX2 kind).
    """
    return {
        "id": model_id,
        "source": {"kind": "local", "path": str(folder)},
        "max_model_len": 2048,
        "engine": {"seed": 1234, "enforce_eager": True},  # loads in about 30 s instead of compiling
        "reasoning": {"parser": PARSER, "budget_tokens": budget_tokens},
        **fields,
    }


def write_models_file(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"models": entries}, sort_keys=False))
    return path


def describe(folder: Path) -> dict[str, Any]:
    """What the fixture's folder holds (for a failing test's message)."""
    config = json.loads((folder / "config.json").read_text())
    return {"vocab_size": config.get("vocab_size"), "files": sorted(p.name for p in folder.iterdir())}
