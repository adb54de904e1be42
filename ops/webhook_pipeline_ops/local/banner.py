"""The banner ``local run`` prints once the stack is up: its endpoints, queues, functions,
pollers and files, what to try, and with ``--for-containers`` how to run ``sam local invoke``."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from webhook_pipeline_ops.local import SAM_ENV_FILE, SECRETS_FILE
from webhook_pipeline_ops.local.containers import CONTAINER_HOST
from webhook_pipeline_ops.output import command_name

if TYPE_CHECKING:
    from webhook_pipeline_ops.local.stack import LocalStack

CONSOLE_PORT = 8380  # webhook_pipeline_ops.console.DEFAULT_PORT (not imported: no web deps here)


def render(stack: LocalStack) -> str:
    """The banner of the started ``stack`` (its outputs written)."""
    assert stack.stack is not None and stack.redis is not None
    o = stack.outputs
    main = stack.main_queue()
    workers = ", ".join(
        f"{fn.spec.logical_id} x{fn.concurrency}" for fn in stack.functions.values()
    )
    lines = [
        "",
        "webhook pipeline: local stack is up",
        f"  webhooks   POST {o['ApiUrl']}/webhooks/{{source}}   "
        f"(sources: {', '.join(_sources(stack.dir))})",
        f"  health     GET  {o['ApiUrl']}/health",
        f"  moto       {o['EndpointUrl']}  (SQS, DynamoDB, S3, Secrets Manager, CloudWatch)",
        f"  redis      {stack.redis.url}  ({stack.redis.kind}"
        + (f", pid {stack.redis.pid}" if stack.redis.pid else "")
        + ")",
        f"  queues     {o.get('MainQueueUrl')}  (visibility {main.visibility_timeout} s, "
        f"maxReceiveCount {main.max_receive_count})",
        f"             {o.get('DeadLetterQueueUrl')}",
        f"  table      {o.get('DeliveriesTableName')}    bucket {o.get('PayloadBucketName')}",
        f"  alarms     {len(stack.stack.alarms)} created",
        *_archive_lines(o),
        f"  functions  {workers}  (worker processes, one interpreter each)",
    ]
    for poller in stack.pollers:
        lines.append(
            f"  poller     {poller.queue.name} -> {poller.function.spec.logical_id} "
            f"(batch {poller.source.batch_size}, window "
            f"{poller.source.maximum_batching_window_seconds} s)"
        )
    files = "outputs.json, secrets.json, ready"
    if stack.options.for_containers:
        files += f", {SAM_ENV_FILE}"
    if stack.invoke_gateway is not None:
        lines.append(f"  invoke     {stack.invoke_url()}  (Lambda Invoke API, loopback only)")
    cli = command_name()
    lines += [
        f"  files      {stack.dir}/ ({files})",
        "",
        f"  try:   {cli} send --source stripe --count 5 --duplicates 0.2",
        f"         {cli} deliveries get --local SOURCE DELIVERY_ID   (any operator "
        "command with --local)",
        f"  console:  {cli} console --local   (another terminal; "
        f"http://127.0.0.1:{CONSOLE_PORT}/, or `make console`)",
    ]
    if stack.options.for_containers:
        lines += sam_banner(stack.dir, stack.options.region)
    lines += [f"  stop:  Ctrl-C (or `{cli} local stop`)", ""]
    return "\n".join(lines)


def _archive_lines(outputs: dict[str, object]) -> list[str]:
    """The archive's bucket and queue; its Glue table and Athena workgroup exist in AWS only."""
    if "ArchiveBucketName" not in outputs:
        return []
    return [
        f"  archive    s3://{outputs['ArchiveBucketName']}/archive/  "
        f"(queue {outputs.get('ArchiveQueueUrl')}; Glue table and Athena workgroup: AWS only)"
    ]


def sam_banner(directory: Path, region: str) -> list[str]:
    """How to run ``sam local invoke`` against this stack (``--for-containers``)."""
    env_file = directory / SAM_ENV_FILE
    with contextlib.suppress(ValueError):
        env_file = env_file.resolve().relative_to(Path.cwd())
    return [
        "",
        "  containers: moto and Redis listen on 0.0.0.0 (reachable as "
        f"{CONTAINER_HOST}; local development only)",
        "  sam:   .venv/bin/sam build --config-env local",
        "         .venv/bin/webhook-pipeline events --now --out /tmp/events",
        "         AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
        f"AWS_DEFAULT_REGION={region} \\",
        "           .venv/bin/sam local invoke --config-env local IngestFunction "
        f"-e /tmp/events/ingest-github.json --env-vars {env_file}",
        "",
    ]


def _sources(directory: Path) -> list[str]:
    try:
        return sorted(json.loads((directory / SECRETS_FILE).read_text())["sources"])
    except (OSError, ValueError, KeyError):
        return []
