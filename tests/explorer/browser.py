"""The explorer served as ``themis ui`` serves it and read in headless Chromium (Playwright): start and stop the
server, open pages and time them, read what a page shows.

A page has opened when its script has run to its end, no element is still loading (Streamlit draws a skeleton
while a widget's code arrives), every chart and table in view is drawn and the text the page ends with is on
screen. Its time is the wall-clock time from the navigation (or the click) to then; beside it, the CPU time the
server and the browser spent on it (the kernel's scheduler statistics, ``/proc/<pid>/task/<tid>/schedstat``) and
the share of the machine's CPU time other work held meanwhile (``/proc/stat`` less this test's processes).

The data grid (``st.dataframe``) draws its cells on a canvas; it keeps their text in an accessibility table
(``role="grid"``) that a screen reader, and these helpers, read. A click on a cell is a click at its place on the
canvas, the mouse moved over it first (:func:`aim`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themis_dagster.explorer.launch import streamlit_command
from themis_dagster.settings import PROJECT_ROOT

ROW_PX = 35  # the data grid's row height, header included (Streamlit's default)
OPENED_JS = """(text) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid="stSkeleton"]')) return false;
  const charts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
  if (!charts.every(c => !c.checkVisibility() || c.querySelector('svg, canvas'))) return false;
  const grids = [...document.querySelectorAll('[data-testid="stDataFrame"]')];
  if (!grids.every(g => !g.checkVisibility() || g.querySelector('table[role="grid"] td'))) return false;
  return document.body.innerText.includes(text);
}"""


@dataclass
class Served:
    url: str
    pid: int


@contextmanager
def serve(env: dict[str, str], log: Path, timeout_s: float = 120) -> Iterator[Served]:
    """``themis ui``'s Streamlit command on a free port of 127.0.0.1 with ``env``, this checkout's code first on
    the path, its output in ``log``; stopped (SIGTERM, then SIGKILL) on the way out."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    path = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    with log.open("w") as out:
        command = streamlit_command("127.0.0.1", port)
        server = subprocess.Popen(command, env={**env, "PYTHONPATH": path}, cwd=PROJECT_ROOT, stdout=out, stderr=out)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout_s
            while not _healthy(url):
                if server.poll() is not None:
                    raise AssertionError(f"the explorer exited ({server.returncode}): {log.read_text()[-2000:]}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"the explorer did not answer /_stcore/health in {timeout_s:.0f} s")
                time.sleep(0.5)
            yield Served(url, server.pid)
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
            return bool(answer.read().strip() == b"ok")
    except OSError:
        return False


@dataclass(frozen=True)
class Opening:
    """One page opened: its wall-clock time, the CPU time the server and the browser spent on it, and the share of
    the machine's CPU time that other work (not this test's processes) held meanwhile."""

    page: str
    wall_s: float
    cpu_s: float
    others: float

    def line(self) -> str:
        held = f"other work held {self.others:.0%} of the CPUs"
        return f"{self.page}: {self.wall_s:.2f} s (CPU {self.cpu_s:.2f} s; {held})"


@dataclass
class Clock:
    """Times each page a test opens and bounds it: under ``bound_s`` of CPU time (server and browser), and of
    wall-clock time when other work held less than ``quiet`` of the machine's CPU time meanwhile."""

    server_pid: int
    bound_s: float
    quiet: float
    pages: list[Opening] = field(default_factory=list)
    actions: list[Opening] = field(default_factory=list)

    @contextmanager
    def opening(self, page: Any, name: str, ends_with: str, *, action: bool = False) -> Iterator[None]:
        """Time what the ``with`` block starts (a navigation, a click) until the page has opened with the text
        ``ends_with`` on it, and bound it (an ``action``, a button's work rather than a page, is only timed)."""
        before, machine, started = self._cpu(), _machine_busy_s(), time.monotonic()
        yield
        page.wait_for_function(OPENED_JS, arg=ends_with, polling=50)
        wall = time.monotonic() - started
        after, busy = self._cpu(), _machine_busy_s() - machine
        spent = {key: ran - before.get(key, 0) for key, ran in after.items()}
        page_cpu = sum(ran for key, ran in spent.items() if key[0] != "test") / 1e9
        others = max(0.0, busy - sum(spent.values()) / 1e9) / (wall * (os.cpu_count() or 1))
        opened = Opening(name, wall, page_cpu, min(others, 1.0))
        (self.actions if action else self.pages).append(opened)
        if action:
            return
        assert opened.cpu_s < self.bound_s, f"{opened.line()}: it costs {self.bound_s} s of CPU or more to open"
        if opened.others < self.quiet:
            assert opened.wall_s < self.bound_s, f"{opened.line()}: {self.bound_s} s or more on a quiet machine"

    def _cpu(self) -> dict[tuple[str, str], int]:
        """Nanoseconds on a CPU of each thread of this test's processes: the server's and Chromium's (the page's)
        and the test's own (pytest, Playwright's driver)."""
        found: dict[tuple[str, str], int] = {}
        for pid, name in _mine().items():
            role = "server" if pid == self.server_pid else "browser" if "chrom" in name else "test"
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    found[(role, f"{pid}/{task.name}")] = int((task / "schedstat").read_text().split()[0])
                except (OSError, ValueError, IndexError):
                    continue  # a thread that ended meanwhile
        return found


def _machine_busy_s() -> float:
    """Seconds every CPU of the machine has been busy (``/proc/stat``: all but idle and waiting for I/O)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _mine() -> dict[int, str]:
    """This process and its descendants (the server, Playwright's driver, Chromium), by pid with their names."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)], names[int(entry.name)] = int(rest[1]), name
    mine = {os.getpid()}
    grown = True
    while grown:
        grown = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grown = True
    return {pid: names.get(pid, "") for pid in mine}


def text(page: Any) -> str:
    """Everything the page shows as text."""
    return str(page.evaluate("() => document.body.innerText"))


def grid_rows(grid: Any) -> list[dict[str, str]]:
    """The rows a data grid holds (those drawn: a long grid scrolls), each as {column: text}."""
    return list(
        grid.evaluate(
            """g => {
          const t = g.querySelector('table[role="grid"]');
          const head = [...t.querySelectorAll('th[role="columnheader"]')].map(h => h.textContent);
          return [...t.querySelectorAll('tbody tr')].map(r =>
            Object.fromEntries([...r.querySelectorAll('td')].map((c, i) => [head[i], c.textContent])));
        }"""
        )
    )


def table_rows(table: Any) -> list[dict[str, str]]:
    """The rows of a static table (``st.table``), each as {column: text}."""
    return list(
        table.evaluate(
            """t => {
          const rows = [...t.querySelectorAll('tr')].map(r => [...r.querySelectorAll('th, td')].map(c => c.innerText));
          return rows.slice(1).map(r => Object.fromEntries(r.map((v, i) => [rows[0][i], v])));
        }"""
        )
    )


def aim(page: Any, grid: Any, row: int, x: float) -> tuple[float, float]:
    """The point of the cell of ``row`` (0: the first under the header) at ``x`` across the grid (0-1), the mouse
    over it: the grid scrolled into view and staying where it is (a chart above it still drawing moves it down).
    The grid places a click by where the mouse last moved over it, so the mouse moves there first."""
    box = None
    for _ in range(50):
        grid.scroll_into_view_if_needed()
        page.wait_for_timeout(200)
        if box is not None and box == grid.bounding_box():
            break
        box = grid.bounding_box()
    assert box is not None, "the grid is not on screen"
    point = (box["x"] + x * box["width"], box["y"] + ROW_PX * (row + 1) + ROW_PX / 2)
    page.mouse.move(*point)
    page.wait_for_timeout(200)
    return point


def column_middle(widths: dict[str, int], column: str) -> float:
    """Where the middle of ``column`` lies across a grid whose columns (these widths) stretch to its width (0-1)."""
    names = list(widths)
    before = sum(widths[name] for name in names[: names.index(column)])
    return (before + widths[column] / 2) / sum(widths.values())


def dots(chart: Any) -> int:
    """How many points a chart draws (Vega's symbol marks)."""
    return int(chart.locator("g.mark-symbol path").count())


def hidden_labels(chart: Any) -> list[str]:
    """The names on a chart's axes that Vega hid because they overlapped (numbers on a scale aside)."""
    return list(
        chart.evaluate(
            """c => [...c.querySelectorAll('g.role-axis-label text')]
              .filter(t => t.getAttribute('opacity') === '0' && isNaN(Number(t.textContent.replace('−', '-'))))
              .map(t => t.textContent)"""
        )
    )


def scrolls_sideways(page: Any) -> list[str]:
    """The data grids on the page wider than their box (a column off-screen): their first column's title."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('[data-testid="stDataFrame"]')]
              .filter(g => [...g.querySelectorAll('.dvn-scroller')].some(s => s.scrollWidth > s.clientWidth + 2))
              .map(g => (g.querySelector('th[role="columnheader"]') || {}).textContent || '?')"""
        )
    )
