"""A models file with the default model and one variant per mitigation, for the mitigation tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import SETTINGS, make_resources
from themis_dagster.registry.models import DEFAULT_MODEL_ID
from themis_dagster.resources import ThemisConfig

SYSTEM_PROMPT = "fair-prompt"
LOGIT_BIAS = "no-pronouns"
REPLY_FILTER = "no-he-filter"
INSTRUCTION = "fair-instruction"
FAIR_TEXT = "Treat every group of people equally and do not rely on stereotypes."

VARIANTS: dict[str, dict[str, object]] = {
    SYSTEM_PROMPT: {"kind": "system_prompt", "text": FAIR_TEXT},
    LOGIT_BIAS: {"kind": "logit_bias", "words": {"he": -100.0, "she": -100.0, "his": -100.0, "her": -100.0}},
    REPLY_FILTER: {"kind": "reply_filter", "pattern": r"\bhe\b", "replacement": "they"},
    INSTRUCTION: {"kind": "instruction", "template": "Answer without stereotypes.\n{text}"},
}


def write_models(folder: Path) -> Path:
    """The project's registry plus the variants above (each inheriting the default model's settings)."""
    data = yaml.safe_load(SETTINGS.models_file.read_text())
    data["models"] = [m for m in data["models"] if m["id"] == DEFAULT_MODEL_ID] + [
        {"id": f"{DEFAULT_MODEL_ID}-{name}", "parent": DEFAULT_MODEL_ID, "mitigation": mitigation}
        for name, mitigation in VARIANTS.items()
    ]
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def variant(name: str) -> str:
    return f"{DEFAULT_MODEL_ID}-{name}"


def resources_with_variants(
    warehouse: Path, overrides: Path, engine: str = "fake", keep_warm: bool = False
) -> dict[str, object]:
    resources = make_resources(warehouse, overrides, engine=engine, keep_warm=keep_warm)
    themis = resources["themis"]
    assert isinstance(themis, ThemisConfig)
    fields = themis.model_dump() | {"models_file": str(write_models(warehouse.parent))}
    resources["themis"] = ThemisConfig(**fields)
    return resources
