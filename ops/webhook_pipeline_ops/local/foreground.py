"""``local run`` in the foreground: start the stack, print its banner, wait for SIGINT/SIGTERM,
stop it (:func:`run`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any

from webhook_pipeline_ops.local import PID_FILE
from webhook_pipeline_ops.local.options import Options, StackError
from webhook_pipeline_ops.local.stack import LocalStack

#: How often the main thread of a foreground stack wakes to run a signal handler another
#: thread received.
SIGNAL_POLL_SECONDS = 0.5


def run(options: Options) -> int:
    """Run the stack in the foreground until SIGINT/SIGTERM. Returns the exit code."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    stack = LocalStack(options)
    try:
        try:
            stack.start()
        except StackError as exc:
            print(f"webhook-pipeline local run: {exc}", file=sys.stderr)
            return 1
        (stack.dir / PID_FILE).write_text(f"{os.getpid()}\n")
        print(stack.banner(), flush=True)
        # A timed wait: the kernel may hand SIGINT/SIGTERM to any thread (a busy gateway's), and
        # Python runs the handler only when the main thread next runs bytecode; an untimed wait
        # was never woken then (Ctrl-C on `chaos` left its stack running).
        while not stop.wait(SIGNAL_POLL_SECONDS):
            pass
        print("\nstopping the local stack...", flush=True)
    finally:
        stack.stop()
        with contextlib.suppress(FileNotFoundError):
            pid_file = stack.dir / PID_FILE
            if pid_file.read_text().strip() == str(os.getpid()):
                pid_file.unlink()
        for s, handler in previous.items():
            signal.signal(s, handler)
    print("local stack stopped.", flush=True)
    return 0
