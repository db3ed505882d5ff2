"""A Ctrl-C or SIGTERM ends the whole ``themis run``: the interrupted task stops, no later task starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import requires_mirror
from themis_dagster.cli.interrupts import Interrupted, Interruptions


def test_a_stop_signal_is_seen_whatever_handler_took_it() -> None:
    with Interruptions() as stops:
        assert stops.received() == []
        signal.signal(signal.SIGINT, lambda *_: None)  # as Dagster's step handler swallows it
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        with pytest.raises(Interrupted) as stopped:
            stops.check("m|task")
    assert stopped.value.signum == signal.SIGINT and stopped.value.exit_code == 130
    assert str(stopped.value) == "interrupted by SIGINT during m|task"


def test_sigterm_raises_keyboard_interrupt_while_entered_and_is_restored_after() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with Interruptions() as stops, pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert stops.received() == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == before


def _themis_run(tmp_path: Path, *tasks: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env |= {
        "DAGSTER_HOME": str(tmp_path / "home"),
        "THEMIS_WAREHOUSE": str(tmp_path / "w.duckdb"),
        "THEMIS_DISCOVERED_MODELS_FILE": str(tmp_path / "discovered.yaml"),
        "THEMIS_TASK_OVERRIDES": "",
        "THEMIS_COMMIT_INTERVAL_S": "1",
        "PYTHONUNBUFFERED": "1",
    }
    (tmp_path / "home").mkdir()
    command = [sys.executable, "-m", "themis_dagster.cli", "run", "--skip-reports", "--no-calibrate-judges"]
    for task in tasks:
        command += ["--task", task]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.engine
@requires_mirror
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_inference_ends_the_whole_run_within_seconds(tmp_path: Path, signum: int) -> None:
    """The real engine on all 1,508 CrowS-Pairs pairs, stopped once inference has committed answers: the process
    exits within seconds with 128 + the signal, says what was interrupted, and never starts the next task;
    the answers committed before the signal stay in the request cache."""
    run = _themis_run(tmp_path, "crows_pairs", "winobias")
    assert run.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(run.stdout or []), daemon=True)
    reader.start()
    committed = _first_commit(tmp_path / "w.duckdb", run)  # inference under way: answers committed
    signalled = time.monotonic()
    run.send_signal(signum)
    run.wait(timeout=60)
    took = time.monotonic() - signalled
    reader.join(timeout=10)
    output = "".join(lines)
    assert run.returncode == 128 + signum, output[-3000:]
    assert took < 20, f"{took:.1f} s from the signal to the exit"
    name = signal.Signals(signum).name
    assert f"interrupted by {name} during smollm2-135m-instruct|crows_pairs: stopped" in output
    assert "|winobias" not in output  # the next task never started
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as conn:
        kept = conn.execute("SELECT count(*) FROM request_cache").fetchone()
    assert kept is not None and committed <= kept[0] < 3016, "answers committed before the signal are kept"


def _first_commit(warehouse: Path, run: subprocess.Popen[str], timeout_s: float = 300) -> int:
    """The number of answers in the request cache once the run has committed some (the run holds the file
    only while it commits, so a read-only look in between succeeds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert run.poll() is None, "the run ended before committing an answer"
        try:
            with duckdb.connect(str(warehouse), read_only=True) as conn:
                count = conn.execute("SELECT count(*) FROM request_cache").fetchone()
        except duckdb.Error:  # not created yet, or the run is writing
            count = None
        if count is not None and count[0] > 0:
            return int(count[0])
        time.sleep(0.5)
    pytest.fail(f"no answer committed within {timeout_s} s")
