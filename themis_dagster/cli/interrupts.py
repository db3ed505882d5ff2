"""A Ctrl-C or a scheduler's SIGTERM ends a whole ``themis run``, not just the task it hits.

Dagster turns SIGINT and SIGTERM during a step into ``DagsterExecutionInterruptedError`` and
marks that run failed; ``execute_in_process`` then returns, and a loop over tasks would go on
to the next one, loading or keeping an engine and generating. ``Interruptions`` sees every
such signal whichever handler took it, through a wakeup pipe (``signal.set_wakeup_fd``: the
interpreter writes each signal's number there before any Python handler runs), so the run can
stop after the interrupted task, shut its engines down and exit with ``128 + signal``. What was
committed stays, as the resume promise says: running the command again sends only what was not
answered. A second signal while it stops ends the process at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
from types import FrameType, TracebackType
from typing import Self

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The run was asked to stop (``signum``) while ``during`` was running."""

    def __init__(self, signum: int, during: str) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name} during {during}")
        self.signum = signum
        self.during = during

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number (130, 143)."""
        return 128 + self.signum


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _exit_now(signum: int, frame: FrameType | None) -> None:
    os._exit(128 + signum)


class Interruptions:
    """While entered: every SIGINT and SIGTERM this process receives, in order, whatever handled it."""

    def __enter__(self) -> Self:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        # SIGTERM's default ends the process without a word and without shutting the engine down
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        self._seen: list[int] = []
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.received()  # what came before the exit is still counted afterwards
        signal.set_wakeup_fd(self._previous_fd)
        for signum, handler in self._previous.items():
            if handler is not None:
                signal.signal(signum, handler)
        for fd in (self._read, self._write):
            os.close(fd)
        self._read = -1

    def received(self) -> list[int]:
        """The stop signals received so far (drains the pipe; the list keeps growing)."""
        if self._read < 0:
            return list(self._seen)
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._read, 512):
                self._seen += [signum for signum in chunk if signum in STOP_SIGNALS]
        return list(self._seen)

    def check(self, during: str) -> None:
        """Raise ``Interrupted`` if a stop signal came while ``during`` ran; from then on a second one exits at once."""
        if seen := self.received():
            self.stopping()
            raise Interrupted(seen[0], during)

    def stopping(self) -> None:
        """The run is stopping: another SIGINT or SIGTERM ends the process immediately."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, _exit_now)
