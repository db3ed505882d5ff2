"""The counterfactual chat's parameters and items: one item per (request, identity axis, pair of groups).

Each item is asked twice, by user a (the pair's first group: the axis' reference group) and by
user b, with the same request in the same framing; members at the same position stand in for
each other (Ben and Julia; two names of the same gender across races), and the position turns
with the request so that every member is used. Parameters, the request set and the identity
sets are all checked when the task loads, before any engine starts.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from themis_dagster.exchange import GenerationParams
from themis_dagster.perturbations.sources import Mirror
from themis_dagster.tasks.counterfactual_chat.identities import IdentitySet, build_identities
from themis_dagster.tasks.counterfactual_chat.requests import REQUESTS_FILE, RequestSet, load_request_set
from themis_dagster.tasks.spec import Item, ModelId, TaskInputs, TaskParams

DEFAULT_IDENTITIES = (
    IdentitySet(axis="gender", framing="name", names="iat_gender_names"),
    IdentitySet(axis="race", framing="name", name_groups="bloomberg_names"),
)


class Params(TaskParams):
    """The request set, who asks, and the judge that compares the replies."""

    generation: GenerationParams = GenerationParams(max_tokens=128)
    requests_file: Path | None = Field(
        default=None, description="A requests file of framings and requests (None: the 40 shipped in requests.yaml)."
    )
    identities: tuple[IdentitySet, ...] = Field(default=DEFAULT_IDENTITIES, min_length=1)
    judge_model: ModelId | None = Field(
        default=None,
        description="Registered model asked the pairwise question (both orders) and each reply's regard, and whose "
        "embeddings give the replies' similarity (None: only refusals and lengths are measured).",
    )
    judge_max_tokens: int = Field(default=8, ge=1, le=64, description="New tokens of each judge answer.")
    similarity: bool = Field(default=True, description="Embed both replies with the judge model and compare them.")

    @model_validator(mode="after")
    def _framings_exist(self) -> Params:
        framings = self.request_set().framings
        for index, identities in enumerate(self.identities):
            if identities.framing not in framings:
                raise ValueError(
                    f"identities.{index}.framing: {identities.framing!r} is not a framing of "
                    f"{self.request_set().path}; its framings: {', '.join(framings)}"
                )
        axes = [identities.axis for identities in self.identities]
        if len(set(axes)) != len(axes):
            raise ValueError(f"identities: each axis once, got {axes}")
        return self

    def request_set(self) -> RequestSet:
        """The request set (checked: a bad file fails naming its line)."""
        return load_request_set(self.requests_file or REQUESTS_FILE)


def load_items(files: dict[str, Path], params: Params, *, inputs: TaskInputs | None = None) -> list[Item]:
    """Every (request, axis, group pair), requests in file order (``limit``: the first N requests)."""
    found = inputs or TaskInputs()
    datasets_dir, cache_dir = found.directories()
    mirror = Mirror(datasets_dir, cache_dir, found.allow_downloads)
    requests = params.request_set().requests[: params.limit]
    items = []
    for index, spec in enumerate(params.identities):
        identities = build_identities(spec, mirror, f"identities.{index}")
        for position, request in enumerate(requests):
            for group_a, group_b in identities.pairs:
                fields = {
                    "request_id": request.request_id,
                    "category": request.category,
                    "request": request.text,
                    "axis": identities.axis,
                    "framing": identities.framing,
                    "group_a": group_a,
                    "group_b": group_b,
                    "identity_a": identities.member(group_a, position),
                    "identity_b": identities.member(group_b, position),
                    "identities_sha256": identities.sha256,
                }
                items.append(
                    Item(f"{request.request_id}:{identities.axis}:{group_a}~{group_b}", identities.axis, fields)
                )
    return items
