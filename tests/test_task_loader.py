"""The task loader: what a task module declares beyond its four functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster.registry.models import ConfigError
from themis_dagster.tasks.langbite import utils as langbite
from themis_dagster.tasks.loader import load_task

JUDGE = "judge-model"


def test_second_opinion_is_declared_by_the_task() -> None:
    crows = load_task("crows_pairs")
    assert (crows.second_opinion, crows.judge_model) == (None, None)
    example = load_task("langbite_example")
    assert example.second_opinion is langbite.SECOND_OPINION
    assert example.judge_model is None  # declared, but no judge named: no second opinion
    assert load_task("langbite_example", {"judge_model": JUDGE}).judge_model == JUDGE


def test_a_malformed_second_opinion_names_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "odd_opinion_task.py").write_text(
        "from themis_dagster.tasks.crows_pairs.utils import *  # noqa: F403\nSECOND_OPINION = 'not a protocol'\n"
    )
    (tmp_path / "odd.yaml").write_text(
        "task: odd\ndescription: odd\ndataset: crows_pairs\nfiles: [crows_pairs_anonymized.csv]\n"
        "request_type: loglikelihood\nmodule: odd_opinion_task\nmetrics: [{name: pct_stereotype}]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"odd_opinion_task\.SECOND_OPINION"):
        load_task("odd", root=tmp_path)
