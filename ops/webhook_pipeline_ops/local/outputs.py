"""What the started local stack writes for its clients: ``outputs.json``
(:func:`outputs_document`, named as the deployed stack's outputs) and ``ready``
(:func:`ready_document`)."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from webhook_pipeline_ops.local import SAM_ENV_FILE

if TYPE_CHECKING:
    from webhook_pipeline_ops.local.stack import LocalStack


def outputs_document(local: LocalStack) -> dict[str, Any]:
    """``outputs.json``: the template's outputs plus the local endpoints, queue URLs, table,
    bucket, Redis URL and replay function (names as the deployed stack's outputs)."""
    endpoint = local.endpoint
    assert local.stack is not None and local.gateway is not None and local.redis is not None
    stack = local.stack
    gateway_url = local.gateway_url
    main = local.main_queue()
    dlq = stack.queues.get("DeadLetterQueue")
    if dlq is None and main is not None and main.attributes.get("RedrivePolicy"):
        arn = json.loads(main.attributes["RedrivePolicy"])["deadLetterTargetArn"]
        dlq = stack.queue_by_arn(arn)
    outputs: dict[str, Any] = {
        k: v for k, v in stack.outputs.items() if isinstance(v, str | int | float)
    }
    replay = local.functions.get("ReplayFunction")
    outputs.update(
        {
            "EndpointUrl": endpoint,
            "Region": stack.region,
            "StackName": stack.stack_name,
            "ApiUrl": gateway_url,
            "WebhookUrlTemplate": f"{gateway_url}/webhooks/{{source}}",
            "LambdaEndpointUrl": local.invoke_url() if local.invoke_gateway else None,
            "MainQueueUrl": main.url if main else None,
            "DeadLetterQueueUrl": dlq.url if dlq else None,
            "DeliveriesTableName": stack.tables.get("DeliveriesTable")
            or next(iter(stack.tables.values()), None),
            "PayloadBucketName": stack.buckets.get("PayloadBucket")
            or next(iter(stack.buckets.values()), None),
            "RedisUrl": local.redis.url,
            "ReplayFunctionName": replay.spec.name if replay else None,
        }
    )
    return {k: v for k, v in outputs.items() if v is not None}


def ready_document(local: LocalStack) -> dict[str, Any]:
    """The ``ready`` document of the started stack (after :func:`outputs_document`): PIDs, URLs,
    the main queue's visibility timeout and receive count, when it started."""
    assert local.gateway is not None and local.redis is not None
    opts = local.options
    return {
        "pid": os.getpid(),
        "api_url": local.outputs["ApiUrl"],
        "endpoint_url": local.endpoint,
        "health_url": f"{local.gateway_url}/health",
        "redis_url": local.redis.url,
        "redis_kind": local.redis.kind,
        "redis_pid": local.redis.pid,
        "moto_pid": local.moto.pid if local.moto else None,
        "faults_dir": str(local.faults.directory),
        "worker_pids": {k: fn.pids for k, fn in local.functions.items()},
        "visibility_timeout": local.main_queue().visibility_timeout,
        "max_receive_count": local.main_queue().max_receive_count,
        "started_at": time.time(),
        "for_containers": opts.for_containers,
        **({"sam_env_file": str(local.dir / SAM_ENV_FILE)} if opts.for_containers else {}),
        **({"lambda_endpoint_url": local.invoke_url()} if local.invoke_gateway is not None else {}),
    }
