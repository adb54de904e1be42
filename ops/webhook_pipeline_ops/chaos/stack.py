"""The chaos run's local stack: started as a subprocess on free ports with its own state folder
and a redis-server this module starts and owns (or a running one, named by its state folder),
and the process helpers the faults need (PIDs from ``/proc``, read only).
"""

from __future__ import annotations

import argparse
import contextlib
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The variable naming the processor's hooks module in a local stack.
LEDGER_HOOKS_ENV = "WEBHOOK_PIPELINE_LOCAL_HOOKS_MODULE"
#: The repository (the CLI runs from it; the report's default folder is under it).
ROOT = Path(__file__).resolve().parents[3]

# ------------------------------------------------------------------------------------------------
# processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def listening_pid(port: int) -> int | None:
    """The PID of the process listening on 127.0.0.1/0.0.0.0 ``port`` (from ``/proc``, read only),
    or ``None`` when it cannot be told."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return int(proc.name)
    return None


class RedisControl:
    """The stack's Redis: signals, FLUSHALL, memory limits, and restart empty on its port.

    A redis-server this command started (or restarted) is its child and stopped by its PID at
    :meth:`close`.
    """

    def __init__(self, url: str, pid: int | None) -> None:
        self.url = url
        self.port = int(url.rsplit(":", 1)[1].split("/")[0])
        self.pid = pid
        self.child: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(cls) -> RedisControl:
        control = cls(f"redis://127.0.0.1:{free_port()}/0", None)
        control._spawn()
        return control

    def _spawn(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH")
        self.child = subprocess.Popen(  # noqa: S603 - fixed argv
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.pid = self.child.pid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._client().ping():
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not answer")

    def _client(self) -> Any:
        import redis

        class Quiet(redis.Redis):
            def ping(self, **kwargs: Any) -> bool:
                try:
                    return bool(super().ping(**kwargs))
                except redis.RedisError:
                    return False

        return Quiet.from_url(self.url, socket_timeout=2, socket_connect_timeout=1)

    def kill_restart(self, down: float) -> str:
        old = self.require_pid()
        os.kill(old, signal.SIGKILL)
        if self.child is not None and self.child.pid == old:
            self.child.wait(timeout=10)
        time.sleep(down)
        self._spawn()
        return f"pid {old} SIGKILLed, down {down:.1f} s, restarted empty as pid {self.pid}"

    def stop_cont(self, hold: float) -> str:
        pid = self.require_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(hold)
        finally:
            os.kill(pid, signal.SIGCONT)
        return f"pid {pid} stopped {hold:.1f} s"

    def flush(self) -> str:
        client = self._client()
        keys = client.dbsize()
        client.flushall()
        return f"FLUSHALL ({keys} keys)"

    def full(self, hold: float) -> str:
        client = self._client()
        saved = client.config_get("maxmemory") | client.config_get("maxmemory-policy")
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1")
        try:
            time.sleep(hold)
        finally:
            client.config_set("maxmemory", saved["maxmemory"])
            client.config_set("maxmemory-policy", saved["maxmemory-policy"])
        return f"maxmemory 1 byte + noeviction for {hold:.1f} s (restored {saved})"

    def require_pid(self) -> int:
        if not self.pid:
            raise RuntimeError("the Redis server's PID is unknown")
        return self.pid

    def close(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def cli_command() -> list[str]:
    script = Path(sys.executable).parent / "webhook-pipeline"
    return [str(script)] if script.exists() else [sys.executable, "-m", "webhook_pipeline_ops.cli"]


def _health(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - loopback
            return bool(response.status == 200)
    except OSError:
        return False


def _read_ready(state: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((state / "ready").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and pid_alive(int(doc.get("pid", 0))) else None


def _stack_command(args: argparse.Namespace, state: Path, redis: RedisControl) -> list[str]:
    """``webhook-pipeline local run`` on free ports, with the run's queue settings."""
    port = free_port()
    command = [*cli_command(), "local", "run", "--state-dir", str(state)]
    command += ["--port", str(port), "--moto-port", str(free_port()), "--redis-url", redis.url]
    command += ["--visibility-timeout", str(args.visibility_timeout)]
    command += ["--parameter", f"MaxReceiveCount={args.max_receive_count}"]
    command += ["--parameter", f"PublicBaseUrl=http://127.0.0.1:{port}"]
    return command


def _stack_env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    env["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(state)
    # The hook ledger (one item per hook invocation) where the stack can load it: the processor
    # then measures double-applied. A stack that does not know the variable ignores it.
    env.setdefault(LEDGER_HOOKS_ENV, "webhook_pipeline_ops.ledger")
    return env


def _wait_ready(process: subprocess.Popen[bytes], state: Path, log_path: Path) -> dict[str, Any]:
    """The stack's ready document once its health URL answers; :class:`RuntimeError` when it
    exits or is not ready within 120 s."""
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the local stack exited with {process.returncode}; see {log_path}")
        ready = _read_ready(state)
        if ready and ready.get("pid") == process.pid and _health(ready["health_url"]):
            return ready
        if time.monotonic() > deadline:
            raise RuntimeError(f"the local stack was not ready within 120 s; see {log_path}")
        time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def _running(given: Path, ready: dict[str, Any]) -> Iterator[RedisControl]:
    """The Redis control of a stack already running in ``given``."""
    redis = RedisControl(ready["redis_url"], ready.get("redis_pid"))
    if not redis.pid:
        redis.pid = listening_pid(redis.port)
    try:
        yield redis
    finally:
        redis.close()


@contextlib.contextmanager
def local_stack(
    args: argparse.Namespace,
) -> Iterator[tuple[Path, dict[str, Any], RedisControl, bool]]:
    """A running local stack: ``(state folder, ready document, Redis control, started here)``.

    Uses the stack running in ``args.state_dir`` when its ``ready`` file names a live process;
    else starts one there (or in a temporary folder) with a redis-server of its own, and stops
    both on exit. :class:`RuntimeError` when the stack exits or is not ready within 120 s.
    """
    given = Path(args.state_dir) if args.state_dir else None
    ready = _read_ready(given) if given else None
    if ready is not None and given is not None:
        with _running(given, ready) as redis:
            yield given, ready, redis, False
        return
    state = given or Path(tempfile.mkdtemp(prefix="chaos-stack-"))
    state.mkdir(parents=True, exist_ok=True)
    redis = RedisControl.start()
    log_path = state / "stack.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(  # noqa: S603 - our own CLI
            _stack_command(args, state, redis),
            cwd=ROOT,
            env=_stack_env(state),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield state, _wait_ready(process, state, log_path), redis, True
    finally:
        _stop(process)
        redis.close()
