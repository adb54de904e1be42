"""A local stack as a detached process: started with ``local run --background``
(:func:`start_background`, which waits until it is ready) and stopped by its PID
(:func:`stop_running`, ``local stop``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local import LOG_FILE, PID_FILE, state_dir
from webhook_pipeline_ops.local.options import StackError
from webhook_pipeline_ops.local.state_files import alive, is_stack_process, read_ready


def start_background(
    argv: list[str], directory: Path | None = None, timeout: float = 90.0
) -> dict[str, Any]:
    """Start ``local run ARGV`` as a detached process; wait until it is ready.

    Returns
    -------
    dict
        The ``ready`` document (``pid``, ``api_url``, ``endpoint_url``...).

    Raises
    ------
    StackError
        The process exited or was not ready within ``timeout`` seconds (its log is named).
    """
    folder = state_dir(directory)
    folder.mkdir(parents=True, exist_ok=True)
    running = read_ready(folder)
    if running:
        return running
    log_path = folder / LOG_FILE
    env = dict(os.environ)
    if directory is not None:
        env["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(directory)
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "webhook_pipeline_ops.cli", "local", "run", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    (folder / PID_FILE).write_text(f"{process.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = read_ready(folder)
        if ready and ready.get("pid") == process.pid:
            return ready
        if process.poll() is not None:
            raise StackError(f"the local stack exited with {process.returncode}; see {log_path}")
        time.sleep(0.1)
    process.terminate()
    raise StackError(f"the local stack was not ready within {timeout:.0f} s; see {log_path}")


def stop_running(directory: Path | None = None, timeout: float = 30.0) -> bool:
    """Stop the local stack recorded in the state folder (SIGTERM to its PID). True if one ran."""
    folder = state_dir(directory)
    pid = 0
    ready = read_ready(folder)
    if ready:
        pid = int(ready["pid"])
    else:
        with contextlib.suppress(OSError, ValueError):
            pid = int((folder / PID_FILE).read_text().strip())
    if not pid or not alive(pid) or not is_stack_process(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.1)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
    return True
