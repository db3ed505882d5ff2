"""Tiny PEFT-format LoRA adapters for the default model (SmolLM2-135M), written on the fly.

No adapter can be downloaded here, so the tests make one: ``adapter_config.json`` as PEFT
writes it and ``adapter_model.safetensors`` with tensors named
``base_model.model.model.layers.{i}.self_attn.{q,v}_proj.lora_{A,B}.weight``. PEFT
initialises lora_B to zero (an adapter with no effect); here both factors are random
(fixed seed) so the adapter measurably changes the model's outputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HUB_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"

# The shape-relevant part of the default model's config.json (llama, 30 layers).
SMOLLM2_135M_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 576,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "intermediate_size": 1536,
    "vocab_size": 49152,
}
# SmolLM2-360M: same architecture, different widths (an adapter trained on it must be refused).
SMOLLM2_360M_CONFIG: dict[str, Any] = SMOLLM2_135M_CONFIG | {
    "hidden_size": 960,
    "num_hidden_layers": 32,
    "num_attention_heads": 15,
    "num_key_value_heads": 5,
    "intermediate_size": 2560,
}

RANK = 4
ALPHA = 8
TARGETS = ("q_proj", "v_proj")
SEED = 1234
A_STD = 0.1
B_STD = 0.1


def write_base_config(folder: Path, config: Mapping[str, Any] = SMOLLM2_135M_CONFIG) -> Path:
    """A base-model folder holding only config.json: all the validator reads of the base."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(dict(config)))
    return folder


def adapter_config(
    rank: int = RANK, targets: Sequence[str] = TARGETS, base_model: str | None = HUB_NAME
) -> dict[str, Any]:
    """adapter_config.json with the fields PEFT 0.x writes for a causal-LM LoRA."""
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": ALPHA,
        "lora_dropout": 0.0,
        "target_modules": list(targets),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "modules_to_save": None,
        "use_rslora": False,
        "use_dora": False,
        "rank_pattern": {},
        "alpha_pattern": {},
        "revision": None,
    }


def lora_tensors(
    base: Mapping[str, Any] = SMOLLM2_135M_CONFIG,
    rank: int = RANK,
    targets: Sequence[str] = TARGETS,
    seed: int = SEED,
) -> dict[str, Any]:
    """Random lora_A [r, in] and lora_B [out, r] for every layer and target (torch, float32)."""
    import torch

    from themis_dagster.registry.lora import projection_shapes

    shapes = projection_shapes(base)
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(int(base["num_hidden_layers"])):
        for target in targets:
            in_features, out_features = shapes[target]
            module = "self_attn" if target in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            prefix = f"base_model.model.model.layers.{layer}.{module}.{target}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, in_features, generator=generator) * A_STD
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(out_features, rank, generator=generator) * B_STD
    return tensors


def write_adapter(
    folder: Path,
    *,
    base: Mapping[str, Any] = SMOLLM2_135M_CONFIG,
    rank: int = RANK,
    targets: Sequence[str] = TARGETS,
    config: Mapping[str, Any] | None = None,
    seed: int = SEED,
) -> Path:
    """Write a PEFT LoRA adapter folder; ``base`` decides the tensor shapes, ``config`` the JSON."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.contiguous() for name, t in lora_tensors(base, rank, targets, seed).items()}
    save_file(tensors, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    (folder / "adapter_config.json").write_text(json.dumps(dict(config or adapter_config(rank, targets)), indent=2))
    return folder


def make_valid_adapter(folder: Path) -> Path:
    """r=4 on q_proj and v_proj of every layer of SmolLM2-135M."""
    return write_adapter(folder)


def make_mismatched_adapter(folder: Path) -> Path:
    """An adapter trained on SmolLM2-360M (hidden 960): every shape is wrong for the 135M base."""
    return write_adapter(
        folder, base=SMOLLM2_360M_CONFIG, config=adapter_config(base_model="HuggingFaceTB/SmolLM2-360M")
    )


def merged_state_dict(base_state: Mapping[str, Any], adapter_folder: Path) -> dict[str, Any]:
    """The base weights with the adapter folded in (W + alpha/r * B @ A): a reference for the engine."""
    from safetensors.torch import load_file

    config = json.loads((adapter_folder / "adapter_config.json").read_text())
    scaling = config["lora_alpha"] / config["r"]
    tensors = load_file(str(adapter_folder / "adapter_model.safetensors"))
    merged = dict(base_state)
    for name, lora_a in tensors.items():
        if not name.endswith(".lora_A.weight"):
            continue
        module = name.removeprefix("base_model.model.").removesuffix(".lora_A.weight")
        lora_b = tensors[name.replace(".lora_A.", ".lora_B.")]
        weight = merged[f"{module}.weight"]
        merged[f"{module}.weight"] = (weight.float() + scaling * lora_b.float() @ lora_a.float()).to(weight.dtype)
    return merged
