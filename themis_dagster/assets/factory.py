"""The decorator arguments each asset group shares, written once.

Every evaluation asset is partitioned by model x task, writes one DuckDB table and carries
the package version as its code version; every report asset rebuilds itself after new
metrics. The factories below say that once, so an asset module declares only what is its
own: its description, upstream assets, engine kind and checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from dagster import AssetCheckSpec, AssetDep, AssetsDefinition, MaterializeResult, PartitionsDefinition, asset

from themis_dagster import __version__
from themis_dagster.assets.automation import REPORT_CONDITION
from themis_dagster.partitions import evaluation_partitions
from themis_dagster.runs.pools import ENGINE_POOL

EVALUATION_GROUP = "evaluation"
COMPARISONS_GROUP = "comparisons"
REPORTS_GROUP = "reports"
ROW_COUNT = "dagster/row_count"  # Dagster's own row-count metadata key (shown in the UI's table view)

AssetDecorator = Callable[[Callable[..., Any]], AssetsDefinition]

# What an asset returns. Dagster recognises an asset whose checks report through its
# MaterializeResult only by the bare class (``op_definition._is_result_object_type``), while
# strict mypy wants the type argument: each gets the form it reads.
if TYPE_CHECKING:
    AssetResult = MaterializeResult[None]
else:
    AssetResult = MaterializeResult


class _Declared(TypedDict):
    group_name: str
    kinds: set[str]
    code_version: str
    deps: list[AssetsDefinition | AssetDep]
    description: str


def _declared(
    group: str, kinds: Iterable[str], deps: Iterable[AssetsDefinition | AssetDep], description: str
) -> _Declared:
    """The arguments every asset of ours passes: its group, kinds, upstream assets, description, and the
    package version as code version (so a release marks every asset's materializations stale)."""
    return {
        "group_name": group,
        "kinds": set(kinds),
        "code_version": __version__,
        "deps": list(deps),
        "description": description,
    }


def evaluation_asset(
    *,
    description: str,
    deps: Iterable[AssetsDefinition | AssetDep] = (),
    kinds: Iterable[str] = ("duckdb",),
    checks: Mapping[str, str] | None = None,
    pool: str | None = None,
) -> AssetDecorator:
    """One stage of the model x task chain; ``checks`` maps check name -> description.

    ``deps``: upstream assets (an ``AssetDep`` where the partitions do not map one to one).

    ``pool``: the Dagster concurrency pool the stage's step takes a slot of (the engine's).
    """

    def decorate(compute: Callable[..., Any]) -> AssetsDefinition:
        specs = [
            AssetCheckSpec(name=name, asset=compute.__name__, description=text) for name, text in (checks or {}).items()
        ]
        return asset(
            partitions_def=evaluation_partitions,
            **_declared(EVALUATION_GROUP, kinds, deps, description),
            check_specs=specs,
            pool=pool,
        )(compute)

    return decorate


def comparison_asset(
    *,
    description: str,
    deps: Iterable[AssetsDefinition | AssetDep],
    check_specs: Sequence[AssetCheckSpec] | None = None,
) -> AssetDecorator:
    """A paired comparison within one model x task partition of the chain (the model against its parent, a variant
    against its task), after the partition's metrics."""
    return asset(
        partitions_def=evaluation_partitions,
        **_declared(COMPARISONS_GROUP, ("duckdb",), deps, description),
        check_specs=check_specs,
    )


def report_asset(
    *, description: str, deps: Iterable[AssetsDefinition | AssetDep], kinds: Iterable[str] = ("duckdb",)
) -> AssetDecorator:
    """A report over every partition, rebuilt by the automation sensor after new metrics."""
    return asset(**_declared(REPORTS_GROUP, kinds, deps, description), automation_condition=REPORT_CONDITION)


def model_asset(*, partitions_def: PartitionsDefinition, group: str, description: str) -> AssetDecorator:
    """An asset whose step asks a model outside the evaluation chain (a judge's calibration, LangBiTe's
    generator): it writes DuckDB, loads a vLLM engine and so takes a slot of the engine pool."""
    declared = _declared(group, ("duckdb", "vllm"), (), description)
    return asset(partitions_def=partitions_def, **declared, pool=ENGINE_POOL)
