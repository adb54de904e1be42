"""The local stack's state folder: the ``ready`` document of a live stack (:func:`read_ready`),
whether a recorded process still runs (:func:`alive`, :func:`is_stack_process`) and atomic JSON
writes (:func:`write_json`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local import READY_FILE, state_dir


def read_ready(directory: Path | None = None) -> dict[str, Any] | None:
    """The ``ready`` document of a live local stack, or ``None`` (a stale file is removed)."""
    path = state_dir(directory) / READY_FILE
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not alive(int(doc.get("pid", 0))):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return doc


def is_stack_process(pid: int) -> bool:
    """Whether ``pid`` runs this CLI (guards against a recycled PID in a stale file)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the file
    return b"webhook_pipeline" in cmdline or b"webhook-pipeline" in cmdline


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is not alive.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def write_json(path: Path, doc: Mapping[str, Any], mode: int = 0o644) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.chmod(mode)
    tmp.replace(path)
