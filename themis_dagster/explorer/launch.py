"""``themis ui``: serve the explorer with Streamlit, on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from themis_dagster.explorer import APP

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501


def streamlit_command(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, extra: Sequence[str] = ()) -> list[str]:
    """The ``streamlit run`` command line: headless, no file watcher, no usage statistics, bound to ``host``."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--browser.gatherUsageStats",
        "false",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "minimal",
        *extra,
    ]


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> NoReturn:
    """Become the Streamlit server (``exec``: a signal to ``themis ui`` reaches the server itself); never returns."""
    command = streamlit_command(host, port)
    print(f"[themis] explorer on http://{host}:{port} (warehouse read-only; Ctrl-C stops it)", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)  # noqa: S606 - our own interpreter and arguments, no shell
