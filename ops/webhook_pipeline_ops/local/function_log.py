"""The functions' log lines of a foreground local stack, kept in a file for ``audit --local``.

The functions log to stdout (Powertools' JSON lines, EMF metrics), and every worker inherits the
stack's stdout. A stack started in the background (or by the tests and ``chaos``) has the state
folder's ``stack.log`` there already, which ``audit --local`` reads. A stack started in a
terminal (``make run``), on a pipe, or with its stdout redirected to a file elsewhere
(``local run > /tmp/x.log``) wrote them where ``audit --local`` does not look.

:func:`keep_function_log` points the stack's stdout at ``logs/functions.log`` in the state
folder (``O_APPEND``: the workers' whole-line writes never interleave) and copies what is
appended to what stdout was (the terminal, the pipe, the file), so that shows what it showed
before. The file holds this run only: it is emptied at start, and removed when the stack's
stdout is the state folder's ``stack.log`` itself (the lines are kept there once), so that
``audit --local`` never counts an earlier run's acceptances.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
from pathlib import Path

from webhook_pipeline_ops.local import LOG_FILE

#: Where a foreground stack's stdout is kept, relative to the state folder.
FUNCTION_LOG = Path("logs") / "functions.log"


class FollowedLog:
    """This process's fd 1 appended to ``path``; a thread copies the appended bytes to what fd 1
    was before (the terminal) every ``poll_seconds``."""

    def __init__(self, path: Path, poll_seconds: float = 0.1) -> None:
        self.path = path
        self.poll_seconds = poll_seconds
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._terminal = -1

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        target = os.open(self.path, flags, 0o644)
        sys.stdout.flush()
        self._terminal = os.dup(1)
        os.dup2(target, 1)  # inherited by every worker the stack starts from here on
        os.close(target)
        self._thread = threading.Thread(target=self._follow, name="function-log", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Give fd 1 back to the terminal after copying what is left."""
        if self._thread is None:
            return
        with contextlib.suppress(ValueError, OSError):
            sys.stdout.flush()
        os.dup2(self._terminal, 1)
        self._stopping.set()
        self._thread.join(timeout=10)
        os.close(self._terminal)
        self._thread = None

    def _follow(self) -> None:
        copying = True
        with self.path.open("rb") as source:
            while True:
                chunk = source.read(65536)
                if chunk:
                    copying = copying and _write_all(self._terminal, chunk)
                    continue
                if self._stopping.is_set():
                    return
                self._stopping.wait(self.poll_seconds)


def _write_all(fd: int, data: bytes) -> bool:
    """Write ``data`` to ``fd``; ``False`` when it cannot be written (a closed terminal)."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        return False
    return True


def _is_file(out: os.stat_result, path: Path) -> bool:
    """Whether ``out`` (an ``fstat``) is the regular file at ``path``."""
    try:
        there = path.stat()
    except OSError:
        return False
    return stat.S_ISREG(out.st_mode) and (out.st_dev, out.st_ino) == (there.st_dev, there.st_ino)


def keep_function_log(folder: Path) -> FollowedLog | None:
    """Keep the functions' log lines of the stack about to start in ``folder`` in
    ``folder/logs/functions.log`` (see the module docstring).

    Returns
    -------
    FollowedLog | None
        The started copy (stop it when the stack has stopped), or ``None`` when stdout is
        already ``folder/stack.log`` (a stale ``functions.log`` is removed then) or closed.
    """
    path = folder / FUNCTION_LOG
    try:
        out = os.fstat(1)
    except OSError:
        return None
    if _is_file(out, folder / LOG_FILE):
        path.unlink(missing_ok=True)
        return None
    log = FollowedLog(path)
    log.start()
    return log
