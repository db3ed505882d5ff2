"""A perturbation that changes nothing has a paired effect of exactly 0 with p = 1, on the real engine.

``themis run`` (a separate process, as ``make run`` starts one: the task dimension holds the
variants of its overrides file) evaluates a few Winogender sentences, then three variants: the
``identity``, a user's word-pair CSV whose words no sentence holds, and ``gender_swap``. Each
variant's requests are answered by the engine again under their own key (no answer of the
original is reused), so the no-ops' zero differences are the engine answering the same text the
same way; their items are all counted unchanged, and compared in the ``all`` scope only.

Run behind the engine lock:
``flock /tmp/themis-engine.lock pytest -m engine tests/engines/vllm/test_perturbation_noop.py``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.cli.test_run_variants import themis_run
from tests.conftest import requires_mirror
from themis_dagster.registry.models import DEFAULT_MODEL_ID

pytestmark = [pytest.mark.engine, requires_mirror]

ITEMS = 12  # one occupation's sentences: 4 male, 4 female, 4 neutral; two loglikelihoods each
NO_OPS = ("winogender__identity", "winogender__absent")
TASKS = ("winogender", *NO_OPS, "winogender__gender_swap")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The four partitions evaluated by ``themis run`` on the real engine; its warehouse."""
    folder = tmp_path_factory.mktemp("noop")
    (folder / "pairs.csv").write_text("a,b\nzzyzx,qwxyz\n")  # no Winogender sentence holds either word
    overrides = {"winogender": {"limit": ITEMS, "perturbations": [
        "identity", {"name": "absent", "kind": "word_pairs", "path": "pairs.csv"}, "gender_swap",
    ]}}  # fmt: skip
    themis_run(folder, overrides, TASKS, "vllm")
    return folder / "w.duckdb"


def _rows(database: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    with duckdb.connect(str(database), read_only=True) as conn:
        return conn.execute(sql, list(args)).fetchall()


@pytest.mark.parametrize("variant", NO_OPS)
def test_a_no_op_perturbations_effect_is_exactly_zero_with_p_one(warehouse: Path, variant: str) -> None:
    effects = _rows(
        warehouse,
        "SELECT scope, metric, value, original_value, difference, ci_low, ci_high, p_value, n_pairs, n_changed, "
        "n_unchanged FROM perturbation_effects WHERE model = ? AND task = ? AND subset IS NULL ORDER BY metric",
        DEFAULT_MODEL_ID, variant,
    )  # fmt: skip
    assert {row[1] for row in effects} == {"accuracy", "gotcha_accuracy", "male_female_gap"}, effects
    for scope, metric, value, original, difference, low, high, p_value, pairs, changed, unchanged in effects:
        assert scope == "all", metric  # nothing changed: no `changed` rows
        assert value == original and difference == 0.0 and low == high == 0.0, (metric, value, original)
        assert p_value == 1.0, metric
        assert (changed, unchanged) == (0, ITEMS) and pairs > 0, metric
    # the same texts as the original, every one answered by the engine again, each with the same log-likelihood
    same = _rows(
        warehouse,
        "SELECT count(*), count(*) FILTER (WHERE o.context = v.context AND o.continuation = v.continuation), "
        "count(*) FILTER (WHERE r.logprob = s.logprob) FROM prompts v JOIN prompts o ON o.request_id = v.request_id "
        "AND o.task = 'winogender' AND o.model = v.model JOIN responses r ON r.task = v.task AND "
        "r.request_id = v.request_id JOIN responses s ON s.task = 'winogender' AND s.request_id = v.request_id "
        "WHERE v.task = ?",
        variant,
    )
    assert same == [(2 * ITEMS, 2 * ITEMS, 2 * ITEMS)]


def test_each_variant_was_answered_by_the_engine_under_its_own_key(warehouse: Path) -> None:
    cached = _rows(warehouse, "SELECT count(DISTINCT fingerprint) FROM request_cache WHERE model = ?", DEFAULT_MODEL_ID)
    assert cached == [(len(TASKS) * 2 * ITEMS,)]  # four partitions' requests, none shared
    records = _rows(warehouse, "SELECT task, config->>'$.perturbation.name' FROM evaluation_runs ORDER BY task")
    assert records == [("winogender", None), ("winogender__absent", "absent"),
                       ("winogender__gender_swap", "gender_swap"), ("winogender__identity", "identity")]  # fmt: skip


def test_a_perturbation_that_changes_text_is_compared_on_what_it_changed(warehouse: Path) -> None:
    counts = _rows(
        warehouse,
        "SELECT DISTINCT scope, n_changed, n_unchanged FROM perturbation_effects WHERE task = ? ORDER BY scope",
        "winogender__gender_swap",
    )
    assert counts == [("all", 8, 4), ("changed", 8, 4)]  # the male and female sentences; the neutral ones left
