"""The families' Dagster side: their own assets, and the rows of them ``task_dataset`` hands a task.

A family declares these in its ``family.yaml`` (``assets``, ``dataset_inputs``; ``tasks/family.py``);
the platform finds them there and never names a family. A declared object of the wrong kind fails
when the definitions load, naming the family and the field.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetDep,
    AssetsDefinition,
    BetaWarning,
    DimensionPartitionMapping,
    IdentityPartitionMapping,
    MultiPartitionMapping,
)

from themis_dagster.assets.factory import REPORTS_GROUP
from themis_dagster.errors import ConfigError
from themis_dagster.resources import WarehouseResource
from themis_dagster.tasks.family import ExtensionPoint, extensions
from themis_dagster.tasks.loader import LoadedTask

UpstreamRows = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class DatasetInputs:
    """Rows of one of a family's assets that ``task_dataset`` hands a task as ``TaskInputs.upstream``.

    ``asset``: the asset's key. It is partitioned as the chain is (model x task), and ``task_dataset``
    of model|task depends on every model's partition of the same task: the model that wrote the rows
    is one the task's parameters name (LangBiTe's template generator), not the evaluated one.
    ``read``: the rows for a task, by name; nothing for a task that asks for none (then without
    opening a connection).
    """

    asset: str
    read: Callable[[WarehouseResource, LoadedTask], UpstreamRows]


def _declared(point: ExtensionPoint, check: Callable[[Any], bool], expected: str) -> Mapping[str, Any]:
    found = extensions(point)
    for family, value in found.items():
        if not check(value):
            raise ConfigError(f"family {family!r}: {point}: expected {expected}, got {type(value).__name__}")
    return found


def family_assets() -> list[AssetsDefinition]:
    """Every family's own assets, in family order."""
    declared: Mapping[str, Sequence[AssetsDefinition]] = _declared(
        "assets",
        lambda value: isinstance(value, list | tuple) and all(isinstance(a, AssetsDefinition) for a in value),
        "a list of Dagster asset definitions",
    )
    return [asset for assets in declared.values() for asset in assets]


def is_report(asset: AssetsDefinition) -> bool:
    """Whether an asset is a report (group ``reports``: rebuilt with the others); else materialized on demand."""
    return set(asset.group_names_by_key.values()) == {REPORTS_GROUP}


def _dataset_inputs() -> list[DatasetInputs]:
    declared = _declared("dataset_inputs", lambda value: isinstance(value, DatasetInputs), "a DatasetInputs")
    return list(declared.values())


def dataset_input_deps() -> list[AssetDep]:
    """``task_dataset``'s upstream assets: each family's ``dataset_inputs`` asset, every model of the same task."""
    with warnings.catch_warnings():  # MultiPartitionMapping is marked beta; the mapping itself is plain
        warnings.simplefilter("ignore", BetaWarning)
        same_task = MultiPartitionMapping(
            {"task": DimensionPartitionMapping(dimension_name="task", partition_mapping=IdentityPartitionMapping())}
        )
        return [AssetDep(inputs.asset, partition_mapping=same_task) for inputs in _dataset_inputs()]


def dataset_inputs(warehouse: WarehouseResource, task: LoadedTask) -> UpstreamRows:
    """What ``task_dataset`` hands the task from the families' assets (``TaskInputs.upstream``), by name."""
    rows: UpstreamRows = {}
    for inputs in _dataset_inputs():
        rows |= inputs.read(warehouse, task)
    return rows
