"""The reproducibility part of a model report: each task's latest run record, the configuration every run shares
printed once, the model's parent and mitigation, and the CI label the runs' confidence gives."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from themis_dagster.reports.data import ReportData, RunRecord, dig
from themis_dagster.reports.formatting import MISSING, clip


def ci_label(runs: Sequence[RunRecord]) -> str:
    """``95% CI`` when every task used the same confidence, else plain ``CI``."""
    levels = {dig(run.config, "task_params", "confidence") for run in runs}
    levels.discard(None)
    if len(levels) == 1:
        level = levels.pop()
        if isinstance(level, int | float) and 0 < level < 1:
            return f"{100 * level:g}% CI"
    return "CI"


def _text(value: object, limit: int = 80) -> str:
    return MISSING if value is None or value == "" else clip(value, limit)


def run_rows(data: ReportData, shared: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for run in data.runs:
        config = run.config
        sha = dig(config, "weights", "weights_sha256")
        settings = dig(config, "engine", "settings")
        engine_bits = [dig(config, "engine", "engine")]
        if isinstance(
            settings, Mapping
        ):  # the dtype the answers were computed in, as the model_precision view reads it
            engine_bits += [settings.get("device"), dig(config, "precision", "dtype") or settings.get("dtype")]
        versions = dig(config, "engine", "versions")
        params = dig(config, "task_params")
        shown = {}
        if isinstance(params, Mapping):
            shown = {k: v for k, v in params.items() if k in ("seed", "limit", "bootstrap_resamples", "confidence")}
        revision = dig(config, "weights", "revision") or dig(config, "model", "revision")
        source = dig(config, "model", "source", "hub_equivalent") or dig(config, "model", "source", "repo_id")
        rows.append(
            {
                "task": run.task,
                "run_id": run.run_id[:8],
                "when": run.materialized_at.strftime("%Y-%m-%d %H:%M") if run.materialized_at else MISSING,
                "revision": " · ".join(_text(v) for v in (revision, source) if v) or MISSING,
                "sha": (sha[:12] + "…") if isinstance(sha, str) and len(sha) > 12 else _text(sha),
                "sha_full": _text(sha, 200),
                "engine": " · ".join(_text(b) for b in engine_bits if b) or MISSING,
                "versions": ", ".join(f"{k} {v}" for k, v in versions.items())
                if isinstance(versions, Mapping)
                else MISSING,
                "params": " ".join(f"{k}={v}" for k, v in shown.items()) or MISSING,
                "config_json": config_json(_own_config(config, shared)) if config else "(unreadable)",
            }
        )
    return rows


def config_json(config: Mapping[str, Any]) -> str:
    return json.dumps(config, indent=1, sort_keys=True, default=str)


def shared_config(configs: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The top-level sections of a run configuration equal in every run (at least two): the report
    prints them once, and each task only what is its own (the weights, engine and versions of one
    model's runs repeat in every one of them, about 5 kB a task)."""
    readable = [config for config in configs if config]
    if len(readable) < 2 or len(readable) < len(configs):
        return {}
    first = readable[0]
    return {
        key: value
        for key, value in first.items()
        if all(key in other and config_json({key: other[key]}) == config_json({key: value}) for other in readable[1:])
    }


def _own_config(config: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key not in shared}


def variant(data: ReportData) -> dict[str, Any] | None:
    """The model's parent and mitigation as its latest evaluation recorded them (None: neither)."""
    for run in data.runs:
        parent, mitigation = dig(run.config, "model", "parent"), dig(run.config, "model", "mitigation")
        if parent or mitigation:
            described = ""
            if isinstance(mitigation, Mapping):
                settings = {k: v for k, v in mitigation.items() if k != "kind"}
                described = f"{mitigation.get('kind')}: {json.dumps(settings, sort_keys=True)}"
            return {"parent": parent or MISSING, "mitigation": clip(described, 300) if described else None}
    return None
