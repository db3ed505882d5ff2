"""A private local stack for the cluster tests and ``make cluster-demo``: PostgreSQL and a Ray cluster.

Every service is started on free ports under one folder and stopped by the context manager
that started it, also when the body fails or is interrupted. Nothing here is used by the
platform itself: it only stands up what a real deployment already has.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

POSTGRES_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_bin() -> Path | None:
    """The newest Debian PostgreSQL server binaries, or None (``make system-deps`` installs them)."""
    for folder in POSTGRES_BIN_DIRS:
        if (folder / "pg_ctl").is_file() and (folder / "initdb").is_file():
            return folder
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def why_no_postgres() -> str | None:
    """None if a private PostgreSQL server can be started here, else the reason."""
    if postgres_bin() is None:
        return "PostgreSQL server binaries not found (Debian's postgresql package; `make system-deps` installs it)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: initdb refuses root"
    return None


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    user: str
    dbname: str

    @property
    def url(self) -> str:
        """A SQLAlchemy URL for dagster-postgres, naming psycopg2.

        SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg 3, with which dagster-postgres
        0.29.27's ``NOTIFY run_events, %(id)s`` fails (a syntax error at "$1").
        """
        return f"postgresql+psycopg2://{self.user}@{self.host}:{self.port}/{self.dbname}"

    @property
    def dsn(self) -> str:
        """A libpq key=value string (DuckLake's ``ducklake:postgres:`` catalog)."""
        return f"dbname={self.dbname} host={self.host} port={self.port} user={self.user}"


def _as_owner(command: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *command] if owner else command


@contextlib.contextmanager
def postgres(databases: tuple[str, ...] = ("themis",)) -> Iterator[Postgres]:
    """A throwaway PostgreSQL cluster on a free port, trust auth on 127.0.0.1 only, removed at exit.

    Its folder is a fresh one under the system's temporary folder (the server's own user must
    reach it: running as root, initdb and the server run as ``postgres``).
    """
    reason = why_no_postgres()
    if reason:
        raise RuntimeError(reason)
    binaries = postgres_bin()
    assert binaries is not None
    owner = "postgres" if os.geteuid() == 0 else None  # initdb refuses to run as root
    folder = Path(tempfile.mkdtemp(prefix="themis-pg-"))
    if owner:
        shutil.chown(folder, owner)
    data = folder / "pgdata"
    user = owner or getpass.getuser()
    ctl = [str(binaries / "pg_ctl"), "-D", str(data), "-l", str(folder / "postgres.log"), "-w", "-t", "60"]
    try:
        subprocess.run(
            _as_owner([str(binaries / "initdb"), "-D", str(data), "-U", user, "--auth=trust", "-E", "UTF8"], owner),
            check=True,
            capture_output=True,
        )
        port = free_port()
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        subprocess.run(_as_owner([*ctl, "-o", options, "start"], owner), check=True, capture_output=True)
        for name in databases:
            subprocess.run(
                [str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", user, name],
                check=True,
                capture_output=True,
            )
        yield Postgres("127.0.0.1", port, user, databases[0])
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(_as_owner([*ctl, "-m", "fast", "stop"], owner), capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class RayCluster:
    address: str  # host:port of the head's GCS
    dashboard: str  # http://host:port of the job server (job submission)
    temp_dir: Path


def _ray(args: list[str], env: dict[str, str]) -> None:
    ray = Path(sys.executable).parent / "ray"
    subprocess.run([str(ray), *args], check=True, env=env, capture_output=True, timeout=300)


@contextlib.contextmanager
def ray_cluster(folder: Path, worker_resources: dict[str, float], env: dict[str, str]) -> Iterator[RayCluster]:
    """``ray start --head`` plus one worker node (``ray start --address``) on this host, one CPU each.

    ``worker_resources``: the worker's custom resources (e.g. ``{"fake_gpu": 1}`` standing in for
    a GPU). ``env``: the nodes' environment (Ray jobs inherit it). ``ray stop`` ends both at exit.
    """
    port, dashboard = free_port(), free_port()
    temp_dir = folder / "ray"
    temp_dir.mkdir(parents=True, exist_ok=True)
    node_env = {**env, "RAY_USAGE_STATS_ENABLED": "0"}
    try:
        _ray(["start", "--head", f"--port={port}", "--num-cpus=1", "--node-ip-address=127.0.0.1",
              "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
              f"--temp-dir={temp_dir}", "--disable-usage-stats"], node_env)  # fmt: skip
        _ray(["start", f"--address=127.0.0.1:{port}", "--num-cpus=1", "--node-ip-address=127.0.0.1",
              f"--resources={json.dumps(worker_resources)}", "--disable-usage-stats"], node_env)  # fmt: skip
        yield RayCluster(f"127.0.0.1:{port}", f"http://127.0.0.1:{dashboard}", temp_dir)
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            _ray(["stop", "--force"], node_env)
