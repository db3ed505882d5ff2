"""A private local stack for the cluster tests and ``make cluster-demo``: PostgreSQL and a Ray cluster.

Every service is started on free ports under one folder and stopped by the context manager
that started it, also when the body fails or is interrupted. Nothing here is used by the
platform itself: it only stands up what a real deployment already has.
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
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


MARKER = "THEMIS_LOCAL_STACK"  # in the environment of every process a local cluster starts


def _marked(marker: str) -> list[int]:
    """Processes of this user whose environment carries ``THEMIS_LOCAL_STACK=<marker>``.

    Every process of a local Ray cluster (GCS, raylets, dashboard, workers, job drivers) inherits
    its node's environment, so the marker finds exactly this cluster's processes, also those
    that started a session of their own; nothing else on the host is touched.
    """
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _stop_marked(marker: str, grace_s: float = 10.0) -> None:
    """SIGTERM, then after ``grace_s`` SIGKILL, every process carrying the marker."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        pids = _marked(marker)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.2)
            pids = _marked(marker)
        if not pids:
            return


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(check: Callable[[], object], timeout_s: float, what: str, every_s: float = 0.5) -> object:
    """Poll ``check`` until it returns something truthy; raise naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if value := check():
                return value
        time.sleep(every_s)
    raise TimeoutError(f"{what} not ready within {timeout_s:.0f} s")


def alive_nodes(dashboard: str) -> list[dict[str, object]]:
    """The cluster's alive nodes, from the dashboard's state API (node_id, resources_total, ...)."""
    if not dashboard.startswith("http://"):
        raise ValueError(f"not a job server URL: {dashboard!r}")
    with urllib.request.urlopen(f"{dashboard}/api/v0/nodes?limit=100", timeout=10) as answer:  # noqa: S310 - http only
        nodes = json.load(answer)["data"]["result"]["result"]
    return [node for node in nodes if node.get("state") == "ALIVE"]


@contextlib.contextmanager
def ray_cluster(
    env: dict[str, str], head_resources: dict[str, float], worker_resources: dict[str, float]
) -> Iterator[RayCluster]:
    """``ray start --head`` plus one worker node (``ray start --address``) on this host, one CPU each.

    ``*_resources``: each node's custom resources (e.g. ``{"fake_gpu": 1}`` standing in for a
    GPU). ``env``: the nodes' environment (Ray jobs inherit it). Each node runs under
    ``ray start --block`` in its own session; at exit those are stopped, then every process still
    carrying this cluster's marker (``_stop_marked``). ``ray stop`` is never used: it stops every
    Ray process of the host, other people's clusters included.
    """
    port, dashboard, agent, client = free_port(), free_port(), free_port(), free_port()
    temp_dir = Path(tempfile.mkdtemp(prefix="tray-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    marker = temp_dir.name
    node_env = {**env, "RAY_USAGE_STATS_ENABLED": "0", MARKER: marker}
    ray = str(Path(sys.executable).parent / "ray")
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--object-store-memory=100000000",
              f"--temp-dir={temp_dir}", "--disable-usage-stats", "--block"]  # fmt: skip
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        nodes.append(_start([ray, "start", "--head", f"--port={port}", f"--ray-client-server-port={client}",
                             "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                             f"--dashboard-port={dashboard}", f"--dashboard-agent-listen-port={agent}",
                             f"--resources={json.dumps(head_resources)}", *common],
                            node_env, temp_dir / "head.log"))  # fmt: skip
        url = f"http://127.0.0.1:{dashboard}"
        wait_for(lambda: alive_nodes(url), 180, "the Ray head node")
        nodes.append(_start([ray, "start", f"--address=127.0.0.1:{port}",
                             f"--resources={json.dumps(worker_resources)}", *common],
                            node_env, temp_dir / "worker.log"))  # fmt: skip
        wait_for(lambda: len(alive_nodes(url)) == 2, 180, "the Ray worker node")
        yield RayCluster(f"127.0.0.1:{port}", url, temp_dir)
    finally:
        stop_sessions(nodes, timeout_s=3.0)  # a throwaway cluster: Ray's raylet/GCS ignore SIGTERM for ~10 s
        _stop_marked(marker, grace_s=2.0)
        shutil.rmtree(temp_dir, ignore_errors=True)


def stop_sessions(processes: list[subprocess.Popen[bytes]], timeout_s: float = 30.0) -> None:
    """SIGTERM processes started in their own sessions (their whole groups) at once; SIGKILL what lingers."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# ---------------------------------------------------------------------------------------------
# The whole tier-3 stack on one host: PostgreSQL (instance + DuckLake catalog), a two-node Ray
# cluster, a Dagster daemon with deploy/dagster.ray.yaml. Used by tests/deploy/test_cluster_ray.py and
# deploy/cluster_demo.py (make cluster-demo).

ROOT = Path(__file__).resolve().parent.parent
GPU_STAND_IN = "fake_gpu"  # the custom Ray resource standing in for a GPU on CPU hosts (docs/scale-out.md)
CHAIN = ("task_dataset", "rendered_prompts", "raw_responses", "judgments", "bias_metrics")
STAGE_TABLES = ("task_items", "prompts", "responses", "judgments")  # one row per item / request / answer


@dataclass(frozen=True)
class ClusterStack:
    env: dict[str, str]  # the daemon's environment: every THEMIS_* setting of the deployment
    home: Path  # DAGSTER_HOME (deploy/dagster.ray.yaml as its dagster.yaml)
    ray: RayCluster
    warehouse: str  # THEMIS_WAREHOUSE (ducklake:postgres:...)
    data_path: str  # THEMIS_WAREHOUSE_DATA_PATH
    daemon_log: Path


@contextlib.contextmanager
def cluster_stack(work: Path, engine: str, task_overrides: dict[str, dict[str, object]]) -> Iterator[ClusterStack]:
    """PostgreSQL, a two-node Ray cluster and a Dagster daemon configured for tier 3; all stopped at exit.

    Both Ray nodes declare one ``fake_gpu`` (and one CPU), so every run of a one-GPU model can land on
    either node and two run at once. The Ray nodes get no THEMIS_* variable: runs receive them
    from the daemon through the launcher's ``env_vars`` (as on a real cluster).
    """
    import yaml

    work.mkdir(parents=True, exist_ok=True)
    home = work / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(ROOT / "deploy" / "dagster.ray.yaml", home / "dagster.yaml")
    overrides = work / "task_overrides.yaml"
    overrides.write_text(yaml.safe_dump(task_overrides))
    base = {key: value for key, value in os.environ.items() if not key.startswith(("THEMIS_", "VLLM_", "RAY_"))}
    bin_dir = str(Path(sys.executable).parent)  # `dagster api execute_run`, the Ray job's entrypoint, is found on PATH
    base |= {"PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(home), "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
    with postgres(("dagster", "lake")) as pg:
        lake = dataclasses.replace(pg, dbname="lake")
        with ray_cluster(base, {GPU_STAND_IN: 1}, {GPU_STAND_IN: 1}) as ray:
            env = base | {
                "THEMIS_DAGSTER_POSTGRES_URL": pg.url,
                "THEMIS_RAY_JOB_ADDRESS": ray.dashboard,
                "THEMIS_RAY_GPU_RESOURCE": GPU_STAND_IN,
                "THEMIS_WAREHOUSE": f"ducklake:postgres:{lake.dsn}",
                "THEMIS_WAREHOUSE_DATA_PATH": str(work / "lake"),
                "THEMIS_ENGINE": engine,
                "THEMIS_TASK_OVERRIDES": str(overrides),
                "THEMIS_DISCOVERED_MODELS_FILE": str(work / "discovered_models.yaml"),
                "THEMIS_REPORTS_DIR": str(work / "reports"),
                "THEMIS_EXPORTS_DIR": str(work / "exports"),
                **{key: os.environ[key] for key in ("THEMIS_MODELS_DIR", "THEMIS_CACHE_DIR", "THEMIS_DATASETS_DIR")
                   if os.environ.get(key)},
            }  # fmt: skip
            log = work / "daemon.log"
            daemon_bin = str(Path(sys.executable).parent / "dagster-daemon")
            with log.open("ab") as out:
                daemon = subprocess.Popen([daemon_bin, "run", "-w", str(ROOT / "workspace.yaml")], cwd=ROOT, env=env,
                                          stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            try:
                yield ClusterStack(env, home, ray, env["THEMIS_WAREHOUSE"], env["THEMIS_WAREHOUSE_DATA_PATH"], log)
            finally:
                stop_sessions([daemon], timeout_s=20.0)


@contextlib.contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` updated with ``values`` inside the block (the instance file reads its URL from it)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def launch_backfill(stack: ClusterStack, model: str, tasks: list[str]) -> str:
    """What the UI's "Materialize" does: register the model partition, add an asset backfill for the daemon."""
    from dagster import AssetKey, DagsterInstance
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    from themis_dagster.definitions import build_definitions
    from themis_dagster.partitions import MODELS_PARTITION, evaluation_key
    from themis_dagster.registry.model_id import validate_model_id
    from themis_dagster.settings import Settings

    validate_model_id(model)
    with environ(stack.env), DagsterInstance.from_config(str(stack.home)) as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION, [model])
        graph = build_definitions(Settings.from_env()).resolve_asset_graph()
        backfill = PartitionBackfill.from_asset_partitions(
            backfill_id=make_new_backfill_id(),
            asset_graph=graph,
            partition_names=[str(evaluation_key(model, task)) for task in tasks],
            asset_selection=[AssetKey(name) for name in CHAIN],
            backfill_timestamp=time.time(),
            tags={},
            dynamic_partitions_store=instance,
            all_partitions=False,
            title=f"{model} on {len(tasks)} tasks",
            description=None,
            run_config=None,
        )
        instance.add_backfill(backfill)
        return backfill.backfill_id


@dataclass(frozen=True)
class RunPlacement:
    run_id: str
    partition: str
    status: str
    ray_request: str  # the run's dagster-ray/config tag
    node_id: str  # the Ray node its job's driver ran on ("" if Ray does not say)
    node: str  # "head" or "worker"


def backfill_status(stack: ClusterStack, backfill_id: str) -> str:
    from dagster import DagsterInstance

    with environ(stack.env), DagsterInstance.from_config(str(stack.home)) as instance:
        backfill = instance.get_backfill(backfill_id)
        return backfill.status.value if backfill is not None else "MISSING"


def wait_for_backfill(stack: ClusterStack, backfill_id: str, timeout_s: float) -> str:
    """The backfill's final status (COMPLETED_SUCCESS, COMPLETED_FAILED, ...) once it is no longer REQUESTED."""
    status = wait_for(
        lambda: (s := backfill_status(stack, backfill_id)) != "REQUESTED" and s,
        timeout_s,
        f"backfill {backfill_id}",
        every_s=2,
    )
    return str(status)


def run_placements(stack: ClusterStack, backfill_id: str) -> list[RunPlacement]:
    """Each run of the backfill with the Ray node its job ran on (Ray's job info: ``driver_node_id``)."""
    from dagster import DagsterInstance, RunsFilter
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(stack.ray.dashboard)
    heads = {str(node["node_id"]) for node in alive_nodes(stack.ray.dashboard) if node.get("is_head_node")}
    placements = []
    with environ(stack.env), DagsterInstance.from_config(str(stack.home)) as instance:
        runs = instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill_id}))
    for run in runs:
        try:
            node_id = client.get_job_info(f"dagster-run-{run.run_id}").driver_node_id or ""
        except RuntimeError:  # no such job (the run never reached Ray)
            node_id = ""
        node = "" if not node_id else ("head" if node_id in heads else "worker")
        placements.append(RunPlacement(run.run_id, run.tags.get("dagster/partition", ""), run.status.value,
                                       run.tags.get("dagster-ray/config", ""), node_id, node))  # fmt: skip
    return sorted(placements, key=lambda placement: placement.partition)


def partition_counts(stack: ClusterStack, model: str) -> dict[str, dict[str, tuple[int, int]]]:
    """Per task: per stage table, (rows, distinct keys) of ``model``'s partition in the DuckLake warehouse."""
    from themis_dagster.resources import WarehouseResource
    from themis_dagster.warehouse.tables import declared

    warehouse = WarehouseResource(database=stack.warehouse, data_path=stack.data_path)
    counts: dict[str, dict[str, tuple[int, int]]] = {}
    with warehouse.connect() as conn:
        for table in STAGE_TABLES:
            key = declared(table).primary_key[-1]  # (model, task, key): names are constants, never values
            rows = conn.execute(
                f"SELECT task, count(*), count(DISTINCT {key}) FROM {table} WHERE model = ? GROUP BY task",  # noqa: S608
                [model],
            ).fetchall()
            for task, total, distinct in rows:
                counts.setdefault(task, {})[table] = (int(total), int(distinct))
    return counts


def failure_details(stack: ClusterStack, backfill_id: str, tail_chars: int = 2500) -> dict[str, str]:
    """Per failed run of the backfill: its failure events and the tail of its Ray job's log (for reports)."""
    from dagster import DagsterEventType, DagsterInstance, RunsFilter
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(stack.ray.dashboard)
    details: dict[str, str] = {}
    failures = {DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_FAILURE, DagsterEventType.ENGINE_EVENT}
    with environ(stack.env), DagsterInstance.from_config(str(stack.home)) as instance:
        for run in instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill_id})):
            if run.status.value == "SUCCESS":
                continue
            lines = []
            for record in instance.all_logs(run.run_id):
                event = record.dagster_event
                if event is not None and event.event_type in failures:
                    error = getattr(event.event_specific_data, "error", None)
                    lines.append(f"{event.event_type_value}: {record.message} {error.to_string() if error else ''}")
            try:
                job_log = client.get_job_logs(f"dagster-run-{run.run_id}")[-tail_chars:]
            except RuntimeError as error:
                job_log = f"(no Ray job log: {error})"
            details[run.tags.get("dagster/partition", run.run_id)] = "\n".join(lines)[-tail_chars:] + "\n" + job_log
    return details
