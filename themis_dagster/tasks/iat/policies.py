"""How far the two scoring policies differ on the same replies, per stimulus set (for docs/iat.md).

Run: ``python bench/iat_policies.py <reply CSV>...`` (e.g. the 84 published GPT-4o files). The
replies go through the importer (``tasks/iat/importer.py``), as ``themis import`` stores them, then
through ``judge`` under ``scoring: project`` and ``scoring: reference`` (here).
"""

from __future__ import annotations

import pandas as pd

from themis_dagster.stats import t_test_mean_zero
from themis_dagster.tasks.iat.utils import Params, judge
from themis_dagster.tasks.spec import Item, Request, Response, TaskInputs


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


def compare_policies(
    items: list[Item], requests: list[Request], responses: list[Response], inputs: TaskInputs
) -> pd.DataFrame:
    """Per set (and ``all``): replies, scored n, mean D and t-test p under each policy.

    ``inputs``: where the reference policy's synonym file is found.
    """
    frames = {}
    for scoring in ("project", "reference"):
        judged = judge(items, requests, responses, Params(scoring=scoring), inputs=inputs)
        frames[scoring] = pd.DataFrame({"set": [j.subset for j in judged], "score": [j.score for j in judged]})
    both = pd.concat([frames["project"].assign(set="all"), frames["project"]])
    both_ref = pd.concat([frames["reference"].assign(set="all"), frames["reference"]])
    table = _summary(both, "project").join(_summary(both_ref, "reference"))
    table.insert(0, "replies", both.groupby("set", sort=False).size())
    table["difference"] = table["reference_mean_d"] - table["project_mean_d"]
    return table
