"""How far the two scoring policies differ on the same replies, per stimulus set (for docs/iat.md).

Run: ``python -m themis_dagster.tasks.iat.policies <reply CSV>...`` (e.g. the 84 published
GPT-4o files). The replies go through the importer (``importers/iat.py``), as ``themis import``
stores them, then through ``judge`` under ``scoring: project`` and ``scoring: reference``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from themis_dagster.importers.iat import import_replies
from themis_dagster.stats import t_test_mean_zero
from themis_dagster.tasks.iat.stimuli import MAIN_FILE, SYNONYM_FILE
from themis_dagster.tasks.iat.utils import Params, judge


def _summary(frame: pd.DataFrame, prefix: str) -> pd.DataFrame:
    rows = {}
    for key, group in frame.groupby("set", sort=False):
        scores = group["score"].dropna()
        test = t_test_mean_zero(scores.to_numpy())
        rows[key] = {
            f"{prefix}_n": len(scores),
            f"{prefix}_mean_d": scores.mean() if len(scores) else float("nan"),
            f"{prefix}_t_p": test.p_value,
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def compare_policies(paths: Sequence[Path], files: Mapping[str, Path]) -> pd.DataFrame:
    """Per set (and ``all``): replies, scored n, mean D and t-test p under each policy."""
    imported = import_replies(paths, files)
    frames = {}
    for scoring in ("project", "reference"):
        judged = judge(imported.items, imported.requests, imported.responses, Params(scoring=scoring))
        frames[scoring] = pd.DataFrame({"set": [j.subset for j in judged], "score": [j.score for j in judged]})
    both = pd.concat([frames["project"].assign(set="all"), frames["project"]])
    both_ref = pd.concat([frames["reference"].assign(set="all"), frames["reference"]])
    table = _summary(both, "project").join(_summary(both_ref, "reference"))
    table.insert(0, "replies", both.groupby("set", sort=False).size())
    table["difference"] = table["reference_mean_d"] - table["project_mean_d"]
    return table


def main(argv: Sequence[str]) -> None:
    from themis_dagster.datasets import resolve_file
    from themis_dagster.settings import Settings

    settings = Settings.from_env()
    files = {
        name: resolve_file("iat", name, datasets_dir=settings.datasets_dir, cache_dir=settings.cache_dir).path
        for name in (MAIN_FILE, SYNONYM_FILE)
    }
    table = compare_policies([Path(arg) for arg in argv], files)
    print(table.to_markdown(floatfmt=".3f"))


if __name__ == "__main__":
    main(sys.argv[1:])
