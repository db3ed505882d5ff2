"""The multiple-choice tasks (tasks/choices.py, tasks/lettered.py) ask and judge exactly as they always did.

Each task runs a small fixed sample of the dataset mirror on the fake engine: replies drawn from
a fixed list by the prompt's hash (letters, announcements in each language, choice texts, empty
and unreadable replies), some requests failing and some responses missing. The digests pin the
requests (every field, and each request's cache fingerprint), the judgments (every field, as the
warehouse stores ``detail``) and the metric values (to 12 significant digits, so a platform's
last bit of a bootstrap does not count). They were recorded before the tasks were declared on
the shared kind: a change to any prompt byte, request id, judgment or metric fails here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest

from tests.conftest import MIRROR, SETTINGS, requires_mirror
from themis_dagster.datasets import resolve_file
from themis_dagster.engines.fake import FakeEngine
from themis_dagster.engines.fingerprint import request_fingerprint
from themis_dagster.exchange import GenerationParams
from themis_dagster.tasks.loader import load_task

REPLIES = [
    "A", "B", "C", "(b)", "(a)", "Answer: (b)", "The answer is C.", "정답: A", "할머니입니다.", "答案：B",
    "La respuesta es B", "Het antwoord is C", "Cevap: A", "", "???", "the designer", "not enough information",
    "B) The woman", "unknown", "Resposta: C", "A and B", "No lo sé",
]  # fmt: skip
# task -> (params, digests of requests, judgments, metric values)
GOLDEN: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "bbq": ({"limit": 12}, "6379a9184d1cc4a5", "07aa245abb412d70", "61a895f1ade08c80"),
    "bbq_generate": ({"limit": 12}, "2571873e84ae8c92", "e0128f2daecc3ae6", "24bb1d81195d38df"),
    "esbbq": ({"limit": 6}, "d43afeb7d5590817", "3557695d5c2147c5", "ec5015b73c30e01b"),
    "esbbq_generate": ({"limit": 6}, "86d9026544934760", "9fefe1f68c7c2e3e", "819af26a79fa2d00"),
    "cabbq": ({"limit": 6}, "736cf5f0913b3659", "4c179ef20bc79ba9", "2dd9b44bd5a1b1e7"),
    "cabbq_generate": ({"limit": 6}, "f49ab128f4e146e8", "5563a37ba09e72b0", "8b1b172fdb40900b"),
    "mbbq": ({"limit": 3}, "f802c149fa146f00", "cf0afee2b7fd3870", "389dcec8c77d670d"),
    "mbbq_generate": ({"limit": 3}, "e30561a4602f510a", "5f6c119cd59a45ad", "1891a1d241b4e923"),
    "kobbq": ({"limit": 5}, "43e28527b25b37ea", "f2908711ef92bf3f", "d13caea0a2964089"),
    "kobbq_generate": ({"limit": 5}, "d61106eb55a639ac", "10425d0a954a08c1", "5041b256a34e3b12"),
    "cbbq": ({"limit": 5}, "bbac1ed18df05859", "458d88cc9c63a3f7", "eeb830901ff5b920"),
    "cbbq_generate": ({"limit": 5}, "24f67ff935ab31bf", "6e43a60676d1e3e3", "dc062b7923fb1695"),
    "winobias": ({"limit": 15}, "5844d2e38dd36517", "2a6ba98cfca5b100", "8d630ee61403c763"),
    "winobias_chat": ({"limit": 15}, "7aa56c6365ebd04b", "2be899adb0ec0796", "37eb51f9abec6fc8"),
    "winogender": ({}, "df27416122792541", "16ff897c6568126b", "61ad0f20177d8006"),
}


def _unit(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def plain(value: object) -> object:
    """A stage record as plain JSON data (dataclasses by field, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def rounded(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metric rows with their floats to 12 significant digits."""
    return [{k: f"{v:.12g}" if isinstance(v, float) else v for k, v in row.items()} for row in metrics]


def run(name: str, overrides: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(requests with their fingerprints, judgments, metric values) of one task on the fake engine."""
    task = load_task(name, {"bootstrap_resamples": 200, **overrides})
    files = {
        file: resolve_file(
            task.spec.dataset, file, datasets_dir=MIRROR, cache_dir=SETTINGS.cache_dir, allow_download=False
        ).path
        for file in task.spec.files
    }
    hooks = task.hooks
    items = hooks.load_items(files, task.params)
    requests = hooks.build_requests(items, task.params, task.templates)
    engine = FakeEngine(
        reply=lambda prompt: REPLIES[_unit(prompt) % len(REPLIES)],
        fail=lambda text: "engine exploded" if _unit("fail" + text) % 17 == 0 else None,
    )
    if task.spec.request_type == "loglikelihood":
        responses = engine.loglikelihood(requests)
    else:
        responses = engine.chat(requests, GenerationParams(**task.params.generation.model_dump()))
    kept = [r for r in responses if _unit("drop" + r.request_id) % 13 != 0]
    judgments = hooks.judge(items, requests, kept, task.params)
    metrics = hooks.compute_metrics(judgments, task.params)
    asked = [dict(plain(request)) | {"fingerprint": request_fingerprint("m", request)} for request in requests]  # type: ignore[call-overload]
    return asked, [plain(j) for j in judgments], [plain(m) for m in metrics]


@requires_mirror
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_requests_judgments_and_metrics_are_those_recorded(name: str) -> None:
    overrides, requests_digest, judgments_digest, metrics_digest = GOLDEN[name]
    requests, judgments, metrics = run(name, overrides)
    assert (digest(requests), digest(judgments), digest(rounded(metrics))) == (
        requests_digest,
        judgments_digest,
        metrics_digest,
    )
