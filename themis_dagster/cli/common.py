"""What several ``themis`` subcommands share: the Dagster home, the tasks with data, the warehouse
resource, the leaderboard's printout and the quick-exit flag."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from themis_dagster.settings import PROJECT_ROOT, Settings

if TYPE_CHECKING:
    import pandas as pd

    from themis_dagster.resources import WarehouseResource

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
QUICK_EXIT = False  # set by console_main: the process ends with os._exit after main()


def ensure_dagster_home() -> Path:
    """Use ``$DAGSTER_HOME`` or the project's ``.dagster_home`` (created with the shipped settings)."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT / ".dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    shipped = PROJECT_ROOT / "dagster.yaml"
    target = home / "dagster.yaml"
    if shipped.is_file() and not target.exists():
        target.write_text(shipped.read_text())
    return home


def judge_calibrations(settings: Settings, tasks: Sequence[str]) -> list[tuple[str, str]]:
    """(judge model, calibration set) of every calibrated question a task's judge asks, in task order, once each.

    A task whose parameters name a ``judge_model`` and whose judge declares calibration sets
    (``evaluation/judging/questions.py``: BOLD's regard question on ``regard``, a user's set declared for one of
    its questions) contributes one pair per judge (its ``judge_model`` and any ``panel_judges``) and set;
    a task's ``refusal_judge_model`` the pair (that model, ``xstest``).
    """
    from themis_dagster.evaluation.judging.questions import sets_checking
    from themis_dagster.refusals.judged import CALIBRATION_SET as REFUSAL_SET
    from themis_dagster.tasks.loader import load_overrides, load_task

    overrides = load_overrides(settings.task_overrides_file)
    pairs: list[tuple[str, str]] = []
    for name in tasks:
        task = load_task(name, overrides.get(name))
        judge = task.calibrated_judge
        if task.judge_model and judge is not None:
            for model in task.judges:
                for calibration_set in sets_checking(name, judge, settings).values():
                    if (model, calibration_set) not in pairs:
                        pairs.append((model, calibration_set))
        refusal_judge = task.params.refusal_judge_model
        if refusal_judge and (refusal_judge, REFUSAL_SET) not in pairs:  # the refusal judge, on XSTest
            pairs.append((refusal_judge, REFUSAL_SET))
    return pairs


def tasks_with_data(settings: Settings, tasks: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Split tasks into those whose benchmark files can be found (or fetched) and those that cannot."""
    from themis_dagster.tasks.loader import tasks_with_local_data

    return tasks_with_local_data(list(tasks), settings.datasets_dir, settings.cache_dir, allow_download=True)


def warehouse_resource(settings: Settings) -> WarehouseResource:
    """The warehouse resource the settings name (a DuckDB file, or a DuckLake database with its data path)."""
    from themis_dagster.resources import WarehouseResource

    return WarehouseResource(
        database=str(settings.warehouse),
        data_path=settings.warehouse_data_path,
        lock_timeout_s=settings.warehouse_lock_timeout_s,
    )


def print_leaderboard(warehouse: Path, out: TextIO | None = None) -> None:
    """Print the leaderboard table, read through the read-only door (a DuckDB file or a DuckLake warehouse), then
    each model's "biased" count (its bias metrics whose CI excludes the ideal), as its report and explorer page count.

    A ranked value a judge model counted (one with a ``judged_metrics`` row) gets its corrected value
    and CI beside it, or the note saying why there is none (docs/judges.md); those columns appear
    only when some ranked metric is judged. A warehouse from an older schema raises ``OlderSchemaError``.
    """
    from themis_dagster.warehouse.read.judged import judged_headline_table
    from themis_dagster.warehouse.read.leaderboard import printed_leaderboard
    from themis_dagster.warehouse.read.verdicts import bias_counts
    from themis_dagster.warehouse.readonly import connect_read_only

    with connect_read_only(warehouse) as conn:
        frame = printed_leaderboard(conn)
        counts = bias_counts(conn)
        judged = judged_headline_table(conn)
    target = out or sys.stdout
    apart = frame[frame["apart"].notna()] if "apart" in frame.columns else frame.iloc[0:0]
    ranked = frame.drop(index=apart.index)
    print(ranked.to_string(index=False) if not ranked.empty else "(leaderboard is empty)", file=target)
    if not apart.empty:  # a judged value whose judge gives no verdict is not ranked with the others
        print("\nranked apart (a judge model counted these, and its calibration gives them no verdict):", file=target)
        print(apart.drop(columns=["rank"]).to_string(index=False), file=target)
    if judged:  # every value a judge model counted, with its judge's kappa and the corrected value or why none
        print("\njudged values (each with its judge; no verdict where the judge is uncalibrated or no better than "
              "chance):", file=target)  # fmt: skip
        print(_judged_table(judged).to_string(index=False), file=target)
    for model, count in counts.items():
        print(f"biased: {model} {count.text} bias metrics whose CI excludes the ideal", file=target)


def print_perturbation_effects(warehouse: Path, model: str, tasks: Sequence[str], out: TextIO | None = None) -> None:
    """Print each variant's headline effects among ``tasks`` (``perturbation_effects``: items changed and left,
    both scopes, the difference with its CI, the metric's test, p and Holm's p over the model's battery).

    Nothing is printed when ``tasks`` holds no variant or the model has no effects stored for them.
    """
    from themis_dagster.tasks.variants import split_variant
    from themis_dagster.warehouse.read.comparisons import perturbation_effect_frame
    from themis_dagster.warehouse.readonly import connect_read_only

    variants = [task for task in tasks if split_variant(task)[1] is not None]
    if not variants or not warehouse.exists():
        return
    with connect_read_only(warehouse) as conn:
        frame = perturbation_effect_frame(conn, model)
    shown = frame.filter(frame["task"].is_in(variants) & frame["subset"].is_null())
    if shown.is_empty():
        return
    columns = ["task", "scope", "metric", "value", "original_value", "difference", "ci_low", "ci_high", "p_value",
               "p_adjusted", "n_pairs", "n_changed", "n_unchanged", "test"]  # fmt: skip
    target = out or sys.stdout
    print(f"\nperturbation effects of {model} (each variant against its task; docs/counterfactuals.md):", file=target)
    print(shown.select(columns).to_pandas().to_string(index=False, float_format="{:.4f}".format), file=target)


def _judged_table(judged: list[dict[str, Any]]) -> pd.DataFrame:
    """The judged values as printed: value, judge, kappa (CI) on its set, corrected (CI) or the note, verdict."""
    import pandas as pd

    from themis_dagster.reports.judged_text import corrected_text
    from themis_dagster.warehouse.read.judged import JudgedRow
    from themis_dagster.warehouse.read.verdicts import judge_withholds

    rows = []
    for row in judged:
        entry = JudgedRow(
            row["task"], None, row["metric"], row["judge"], row["calibration_set"], row["kappa"], row["kappa_ci_low"],
            row["kappa_ci_high"], row["corrected"], row["corrected_ci_low"], row["corrected_ci_high"], row["note"],
            row["n_calibration"],
        )  # fmt: skip
        kappa = "—" if entry.kappa is None else f"{entry.kappa:.3f}"
        if entry.kappa_ci_low is not None and entry.kappa_ci_high is not None:
            kappa += f" ({entry.kappa_ci_low:.3f} – {entry.kappa_ci_high:.3f})"
        rows.append(
            {
                "model": row["model"], "task": row["task"], "metric": row["metric"], "value": row["value"],
                "judge": entry.judge, "kappa (95% CI)": kappa, "calibration_set": entry.calibration_set or "—",
                "corrected": corrected_text(entry), "verdict": judge_withholds(entry) or "judge passed calibration",
            }
        )  # fmt: skip
    return pd.DataFrame(rows)
