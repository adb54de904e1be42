"""Run the SAM functions' handlers in this process, as the Lambda runtime would call them.

A handler module is loaded by file path (``functions/<name>/`` is not a package) after the
function's environment variables from the template are set, so settings validated at cold start
see the local resource names. Invocations get a fake Lambda context (request id, function name,
remaining time from the template's ``Timeout``).

Invocations run one at a time (a process-wide lock): the functions share one interpreter and so
the Powertools Logger/Metrics singletons, which a real Lambda container never shares between
concurrent invocations. Locally an acknowledgement can therefore wait for a running processor
batch; on AWS the two run in separate containers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from webhook_pipeline_ops.local.provision import FunctionSpec

log = logging.getLogger(__name__)

_INVOKE_LOCK = threading.Lock()
_ENV_LOCK = threading.Lock()


@dataclass
class FakeLambdaContext:
    """The attributes of ``awslambdaric``'s context object that handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int
    invoked_function_arn: str
    timeout_seconds: int
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = "local"
    identity: Any = None
    client_context: Any = None
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"
        self._deadline = time.monotonic() + self.timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout (never negative)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class LocalFunction:
    """One function of the template, loaded once (its cold start) and invoked in-process."""

    def __init__(
        self, spec: FunctionSpec, base_environment: Mapping[str, str], region: str
    ) -> None:
        self.spec = spec
        self.region = region
        self.environment = {**base_environment, **spec.environment}
        self._handler: Callable[[dict[str, Any], Any], Any] | None = None
        self._load_lock = threading.Lock()

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:123456789012:function:{self.spec.name}"

    def load(self) -> Callable[[dict[str, Any], Any], Any]:
        """Import the handler module by file path (once) with the function's environment set.

        Raises
        ------
        FileNotFoundError
            The handler file does not exist.
        Exception
            Whatever the module raises at import (a bad configuration fails the cold start).
        """
        with self._load_lock:
            if self._handler is None:
                module_name, _, attr = self.spec.handler.rpartition(".")
                path = self.spec.code_dir / (module_name.replace(".", "/") + ".py")
                if not path.is_file():
                    raise FileNotFoundError(
                        f"{self.spec.logical_id}: handler file {path} not found"
                    )
                with _ENV_LOCK:
                    os.environ.update(self.environment)
                    module = _import_file(f"local_lambda_{self.spec.logical_id}", path)
                self._handler = getattr(module, attr)
                log.info("%s: loaded %s:%s", self.spec.logical_id, path, attr)
            return self._handler

    def invoke(self, event: dict[str, Any]) -> Any:
        """Call the handler with ``event`` and a fresh fake context; exceptions propagate."""
        handler = self.load()
        context = FakeLambdaContext(
            function_name=self.spec.name,
            memory_limit_in_mb=self.spec.memory_mb,
            invoked_function_arn=self.arn,
            timeout_seconds=self.spec.timeout_seconds,
        )
        with _INVOKE_LOCK, _ENV_LOCK:
            os.environ.update(self.environment)
            return handler(event, context)


def _import_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    code_dir = str(path.parent)
    sys.path.insert(0, code_dir)  # sibling modules of the handler (e.g. HOOKS_MODULE)
    try:
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(code_dir)
    return module
