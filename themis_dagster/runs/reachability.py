"""Fail fast, naming the setting, when a service a deployment points at cannot be reached.

A shared instance's PostgreSQL, a DuckLake catalog or a Ray address that is down should stop
a command before any engine starts, with the variable to fix in the message (Dagster's own
error for an unreachable instance database is "too many retries for DB connection").
Passwords in URLs are never echoed.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


class UnreachableError(RuntimeError):
    """A configured service does not answer; the message names the setting and host:port."""


def url_endpoint(url: str, default_port: int) -> tuple[str, int]:
    """The host and port of a URL such as ``postgresql+psycopg2://user:pw@host:5432/db``."""
    parts = urlsplit(url if "://" in url else f"//{url}")
    if not parts.hostname:
        raise ValueError(f"no host in {mask_password(url)!r}")
    return parts.hostname, parts.port or default_port


def mask_password(url: str) -> str:
    """The URL with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def check_reachable(setting: str, host: str, port: int, timeout_s: float = 5.0) -> None:
    """Open and close a TCP connection to ``host:port``; raise naming ``setting`` when it fails."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as error:
        raise UnreachableError(f"{setting}: cannot reach {host}:{port} ({error.strerror or error})") from None


def check_url(setting: str, url: str, default_port: int, timeout_s: float = 5.0) -> None:
    """``check_reachable`` for the endpoint of a URL held by ``setting``."""
    host, port = url_endpoint(url, default_port)
    check_reachable(setting, host, port, timeout_s)
