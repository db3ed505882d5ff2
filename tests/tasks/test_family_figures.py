"""A family's declared figures (``report.figures``): each names what its tasks produce, and a bad one fails when the
families load, naming the family and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from themis_dagster.errors import ConfigError
from themis_dagster.tasks.family import figures_of, load_families
from themis_dagster.tasks.figures import DistributionFigure, RankedFigure, SharesFigure, figure_metrics
from themis_dagster.tasks.loader import load_task

FAMILIES = load_families()


def test_every_declared_figure_reads_a_metric_a_task_of_its_family_declares() -> None:
    declared = 0
    for family in FAMILIES.values():
        metrics = {task: {m.name for m in load_task(task).spec.metrics} for task in family.tasks}
        for figure in family.spec.report.figures:
            drawn_for = figure.tasks or family.tasks
            for metric in figure_metrics(figure):
                assert any(metric in metrics[task] for task in drawn_for), (family.name, figure.title, metric)
            declared += 1
    assert declared >= 9


def test_a_figure_is_drawn_for_its_familys_tasks_or_those_it_names() -> None:
    kinds = {task: [type(f) for f in figures_of(task)] for task in ("opinions_qa", "opinions_qa_chat", "persona_poll")}
    assert DistributionFigure in kinds["opinions_qa"] and DistributionFigure not in kinds["opinions_qa_chat"]
    assert kinds["persona_poll"] == [SharesFigure, RankedFigure]
    assert figures_of("winobias") == () and figures_of("winobias__gender_swap") == ()  # none declared; a variant


def test_a_ranked_figure_draws_the_subsets_it_matches_in_full() -> None:
    groups = RankedFigure(kind="ranked", title="t", metric="representativeness", subsets="[A-Z]+=.+")
    assert groups.draws("POLPARTY=Democrat") and not groups.draws("topic=guns") and not groups.draws(None)
    assert not groups.draws("x POLPARTY=Democrat")  # in full, not a search


def _family(root: Path, figures: str) -> Path:
    folder = root / "newfam"
    folder.mkdir(parents=True)
    (folder / "newfam_task.yaml").write_text("task: newfam_task\n")
    (folder / "family.yaml").write_text(f"family: newfam\ngroup: New\norder: 5\nreport:\n  figures: {figures}\n")
    return root


@pytest.mark.parametrize(
    ("figures", "field"),
    [
        ("[{kind: ranked, title: t, metric: m, subsets: '[A-'}]", "report.figures.0.ranked.subsets"),
        ("[{kind: pie, title: t, metric: m}]", "report.figures.0: Input tag 'pie'"),
        ("[{kind: shares, title: t}]", "report.figures.0.shares.metric: Field required"),
        ("[{kind: distribution, title: t, model: d-model, references: h, labels: o}]",
         "report.figures.0.distribution.model: String should match pattern"),
        ("[{kind: ranked, title: t, metric: m, tasks: [bbq]}]",
         "report.figures.0.tasks: 'bbq' is not a task of this family"),
    ],
)  # fmt: skip
def test_a_bad_figure_fails_naming_the_family_and_the_field(tmp_path: Path, figures: str, field: str) -> None:
    with pytest.raises(ConfigError, match="family 'newfam'") as caught:
        load_families(_family(tmp_path, figures))
    assert field in str(caught.value)
