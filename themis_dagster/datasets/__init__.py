"""Benchmark files: resolved from a local mirror, a download cache, or their canonical URL.

The catalogue of those files is declarative: each family declares its own under ``datasets:`` in its
``family.yaml`` (``tasks/<family>/``); the ``catalog*.yaml`` files here hold those no family owns (the
human-labelled sets that calibrate judges and the refusal detector).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from themis_dagster.errors import StrictModel, load_yaml, validated
from themis_dagster.settings import FAMILIES_DIR, family_sections

CATALOG_DIR = Path(__file__).resolve().parent
DOWNLOAD_TIMEOUT_S = 30


class DatasetNotFoundError(FileNotFoundError):
    """No mirror, cache or download produced the file; the message says where it looked."""


class CatalogFile(StrictModel):
    mirror: str
    url: str
    sha256: str | None = None


class CatalogDataset(StrictModel):
    license: str
    homepage: str
    files: dict[str, CatalogFile]


@cache
def load_catalog(folder: Path = CATALOG_DIR, families: Path = FAMILIES_DIR) -> dict[str, CatalogDataset]:
    """Parse the declarative catalogue of benchmark files: ``catalog*.yaml`` here, then every family's ``datasets``."""
    sources: list[tuple[str, dict[str, object]]] = [
        (path.name, load_yaml(path.read_text()) or {}) for path in sorted(folder.glob("catalog*.yaml"))
    ]
    declared = family_sections("datasets", families)
    sources += [(f"family {family!r}: datasets", entries) for family, entries in declared.items()]
    datasets: dict[str, CatalogDataset] = {}
    for where, entries in sources:
        for name, entry in entries.items():
            if name in datasets:
                raise ValueError(f"dataset {name!r} declared twice in the catalogue ({where})")
            datasets[name] = validated(CatalogDataset, entry, f"{where}.{name}")
    return datasets


@dataclass(frozen=True)
class ResolvedFile:
    """A benchmark file on local disk, with its provenance."""

    dataset: str
    name: str
    path: Path
    url: str
    sha256: str
    origin: str  # "mirror", "cache" or "download"
    expected_sha256: str | None

    @property
    def matches_pinned_version(self) -> bool:
        return self.expected_sha256 is None or self.expected_sha256 == self.sha256


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp,
        urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response,  # noqa: S310 - catalogue URLs only
    ):
        shutil.copyfileobj(response, tmp)
    Path(tmp.name).replace(target)


def resolve_file(
    dataset: str,
    name: str,
    *,
    datasets_dir: Path,
    cache_dir: Path,
    allow_download: bool = True,
) -> ResolvedFile:
    """Find ``dataset/name`` in the mirror, then the cache, then fetch its canonical URL.

    Raises DatasetNotFoundError naming every place it looked and the canonical URL.
    """
    catalog = load_catalog()
    if dataset not in catalog:
        raise KeyError(f"unknown dataset {dataset!r}; known: {', '.join(sorted(catalog))}")
    files = catalog[dataset].files
    if name not in files:
        raise KeyError(f"dataset {dataset!r} has no file {name!r}; known: {', '.join(sorted(files))}")
    entry = files[name]
    candidates = [("mirror", datasets_dir / entry.mirror), ("cache", cache_dir / "datasets" / entry.mirror)]
    for origin, path in candidates:
        if path.is_file():
            return ResolvedFile(dataset, name, path, entry.url, sha256_file(path), origin, entry.sha256)
    cache_path = candidates[1][1]
    download_error = "downloads disabled"
    if allow_download:
        try:
            _download(entry.url, cache_path)
            return ResolvedFile(dataset, name, cache_path, entry.url, sha256_file(cache_path), "download", entry.sha256)
        except OSError as error:
            download_error = f"download failed: {error}"
    looked = ", ".join(str(path) for _, path in candidates)
    raise DatasetNotFoundError(
        f"{dataset}/{name} not found; looked in {looked}; canonical URL {entry.url} ({download_error}). "
        f"Set THEMIS_DATASETS_DIR to a folder holding {entry.mirror}, or download it there."
    )
