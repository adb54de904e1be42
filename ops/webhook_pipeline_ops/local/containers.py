"""The local stack for ``sam local invoke`` (``--for-containers``): what a Lambda container must
see instead of this machine's loopback addresses (:func:`container_value`), the
``--env-vars`` document (:func:`sam_env_vars`), the longer signed-timestamp tolerance a container
start needs (:func:`container_environment`) and the banner lines on how to run it."""

from __future__ import annotations

import logging
import re
from typing import Any

log = logging.getLogger("webhook_pipeline_ops.local")

#: How a Lambda container started by ``sam local invoke`` reaches this machine (sam is run with
#: ``--add-host host.docker.internal:host-gateway``, see samconfig.toml ``[local.*]``).
CONTAINER_HOST = "host.docker.internal"
ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - only with --for-containers, documented as exposing
#: Variables that name paths on this machine: a container keeps the template's value instead.
HOST_ONLY_VARIABLES = frozenset({"SOURCES_FILE"})
_LOOPBACK_URL = re.compile(
    r"(?P<prefix>\b[a-z][a-z0-9+.-]*://(?:[^@/\s]*@)?)"
    r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\])(?=[:/?#]|$)",
    re.IGNORECASE,
)


#: The shortest signed-timestamp tolerance (seconds) of the ingest function ``sam local invoke``
#: runs: one container start outlasts Discord's 15 s (``LOCAL_MIN_TOLERANCE_SECONDS``).
CONTAINER_MIN_TOLERANCE_SECONDS = 300


def container_environment(env: dict[str, str]) -> None:
    """What ``--for-containers`` changes in a function's resolved environment, in place: where
    the template declares ``LOCAL_MIN_TOLERANCE_SECONDS``, :data:`CONTAINER_MIN_TOLERANCE_SECONDS`
    (every signed timestamp accepted for at least that long)."""
    if "LOCAL_MIN_TOLERANCE_SECONDS" in env:
        env["LOCAL_MIN_TOLERANCE_SECONDS"] = str(CONTAINER_MIN_TOLERANCE_SECONDS)


def container_value(value: str) -> str:
    """``value`` as a Lambda container must see it: loopback hosts of URLs -> host.docker.internal.

    ``http://127.0.0.1:5055/123456789012/q`` -> ``http://host.docker.internal:5055/123456789012/q``;
    ``localhost``, ``0.0.0.0`` and ``[::1]`` too, user info kept. Other values are unchanged.
    """
    return _LOOPBACK_URL.sub(lambda m: m["prefix"] + CONTAINER_HOST, value)


def sam_env_vars(functions: Any) -> dict[str, dict[str, str]]:
    """The ``sam local invoke --env-vars`` document of the running stack.

    For each function (by logical id): the environment the local stack resolved for it
    (``AWS_ENDPOINT_URL``, queue URLs, ``REDIS_URL`` with ``REDIS_CLUSTER_MODE=false``...),
    rewritten with :func:`container_value`, restricted to the variables the template declares
    for it (sam ignores the others) and without host paths (:data:`HOST_ONLY_VARIABLES`).
    """
    doc: dict[str, dict[str, str]] = {}
    for fn in functions:
        declared = fn.spec.declared_environment
        if "AWS_ENDPOINT_URL" not in declared:
            log.warning(
                "%s: the template declares no AWS_ENDPOINT_URL, so sam local invoke cannot point "
                "it at the local moto server (its AWS calls would go to AWS)",
                fn.spec.logical_id,
            )
        doc[fn.spec.logical_id] = {
            name: container_value(str(fn.environment[name]))
            for name in declared
            if name in fn.environment and name not in HOST_ONLY_VARIABLES
        }
    return doc
