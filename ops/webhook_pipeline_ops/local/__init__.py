"""The local stack: the whole pipeline on one machine, no AWS account, no Docker.

``webhook-pipeline local run`` starts Redis, a moto server (SQS, DynamoDB, S3, Secrets Manager,
CloudWatch), creates the resources by reading ``template.yaml`` (:mod:`.provision`), serves the
ingest function over HTTP as API Gateway would (:mod:`.http_gateway`) and invokes the processor
from an SQS poller like the event source mapping (:mod:`.poller`). See ``docs/local-stack.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "WEBHOOK_PIPELINE_LOCAL_DIR"
OUTPUTS_FILE = "outputs.json"
SECRETS_FILE = "secrets.json"
READY_FILE = "ready"
SAM_ENV_FILE = "sam-env.json"
PID_FILE = "stack.pid"
LOG_FILE = "stack.log"


def state_dir(path: str | Path | None = None) -> Path:
    """The folder of the local stack's files (``.local-stack/`` in the working directory).

    ``path`` wins, then the ``WEBHOOK_PIPELINE_LOCAL_DIR`` environment variable.
    """
    if path:
        return Path(path)
    return Path(os.environ.get(STATE_DIR_ENV) or ".local-stack")


def project_root(start: Path | None = None) -> Path:
    """The repository root: the first folder holding ``template.yaml`` from ``start`` (cwd) up,
    else the checkout this package lives in."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "template.yaml").is_file():
            return folder
    return Path(__file__).resolve().parents[3]
