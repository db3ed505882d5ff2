"""Checks evaluated with every materialization of a stage (so they work per partition).

Each stage declares its checks (name and description, through ``factory.evaluation_asset``)
and returns their results in its ``MaterializeResult``: row counts match upstream,
parse-success rate, metric sanity.
"""

from __future__ import annotations

import math

import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity

PARSE_SUCCESS_THRESHOLD = 0.9


def rows_match(name: str, actual: int, expected: int, what: str) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=name,
        passed=actual == expected,
        metadata={"actual": actual, "expected": expected},
        description=f"{actual} {what}, upstream has {expected}",
    )


def every_item_has_requests(items: set[str], requested: set[str]) -> AssetCheckResult:
    missing = sorted(items - requested)
    return AssetCheckResult(
        check_name="every_item_has_requests",
        passed=not missing and bool(items),
        metadata={"items": len(items), "items_without_requests": len(missing), "examples": ", ".join(missing[:5])},
    )


def no_engine_errors(errors: int, total: int) -> AssetCheckResult:
    return AssetCheckResult(
        check_name="no_engine_errors",
        passed=errors == 0,
        severity=AssetCheckSeverity.WARN,
        metadata={"errors": errors, "requests": total},
    )


def parse_success(parsed: int, total: int) -> AssetCheckResult:
    rate = parsed / total if total else 0.0
    return AssetCheckResult(
        check_name="parse_success_rate",
        passed=rate >= PARSE_SUCCESS_THRESHOLD,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "parse_success_rate": round(rate, 4),
            "parsed": parsed,
            "judged": total,
            "threshold": PARSE_SUCCESS_THRESHOLD,
        },
        description=f"{rate:.1%} of replies parsed (warns under {PARSE_SUCCESS_THRESHOLD:.0%})",
    )


def ci_contains_estimate(metrics: pl.DataFrame) -> AssetCheckResult:
    """Every CI is ordered, finite and contains its point estimate; every n is positive where a value exists."""
    bad = []
    for row in metrics.iter_rows(named=True):
        value, low, high = row["value"], row["ci_low"], row["ci_high"]
        label = f"{row['metric']}[{row['subset'] or 'all'}]"
        if value is not None and not math.isfinite(value):
            bad.append(f"{label}: value {value}")
        elif value is not None and row["n"] <= 0:
            bad.append(f"{label}: n {row['n']}")
        elif None not in (value, low, high) and not (low - 1e-9 <= value <= high + 1e-9):
            bad.append(f"{label}: {value} outside [{low}, {high}]")
    return AssetCheckResult(
        check_name="ci_contains_estimate",
        passed=not bad,
        metadata={"metrics": metrics.height, "violations": len(bad), "examples": "; ".join(bad[:5])},
    )


def headline_present(metrics: pl.DataFrame, declared: list[str]) -> AssetCheckResult:
    present = set(metrics.filter(pl.col("subset").is_null() & pl.col("value").is_not_null())["metric"].to_list())
    missing = sorted(set(declared) - present)
    return AssetCheckResult(
        check_name="headline_metrics_present",
        passed=not missing,
        severity=AssetCheckSeverity.WARN,
        metadata={"missing": ", ".join(missing) or "-"},
    )
