"""What provisioning the local stack produces: its queues (:class:`QueueInfo`), the functions as
the template declares them (:class:`FunctionSpec`, with their SQS event sources and HTTP routes)
and the whole (:class:`Stack`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class QueueInfo:
    logical_id: str
    name: str
    url: str
    arn: str
    attributes: dict[str, str]

    @property
    def visibility_timeout(self) -> int:
        return int(self.attributes.get("VisibilityTimeout", "30"))

    @property
    def max_receive_count(self) -> int | None:
        policy = self.attributes.get("RedrivePolicy")
        return int(json.loads(policy)["maxReceiveCount"]) if policy else None


@dataclass
class SqsEventSource:
    """A function's SQS event (the event source mapping)."""

    queue_arn: str
    batch_size: int = 10
    maximum_batching_window_seconds: int = 0
    report_batch_item_failures: bool = False
    enabled: bool = True


#: API Gateway's integration timeout of an HTTP API route without ``TimeoutInMillis`` (also
#: its maximum): the request is answered 503 when the function's answer is not back by then.
HTTP_API_INTEGRATION_TIMEOUT_MS = 30_000


@dataclass
class HttpRoute:
    method: str  # upper case or ANY
    path: str  # /webhooks/{source}
    timeout_ms: int = HTTP_API_INTEGRATION_TIMEOUT_MS  # the event's TimeoutInMillis


@dataclass
class FunctionSpec:
    """A SAM function as the local runtime needs it."""

    logical_id: str
    name: str
    code_dir: Path
    handler: str  # module.function
    timeout_seconds: int
    memory_mb: int
    environment: dict[str, str]
    unresolved_environment: list[str]
    sqs_events: list[SqsEventSource]
    http_routes: list[HttpRoute]
    #: Every variable name the template gives the function (``Globals`` merged), resolvable
    #: locally or not, conditional ones included: the names ``sam local --env-vars`` can set.
    declared_environment: list[str] = field(default_factory=list)

    @property
    def arn(self) -> str:
        return self.name


@dataclass
class Stack:
    """Everything :func:`provision` created or read, by logical id."""

    stack_name: str
    region: str
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    buckets: dict[str, str] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)
    alarms: list[str] = field(default_factory=list)
    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def queue_by_arn(self, arn: str) -> QueueInfo:
        for queue in self.queues.values():
            if queue.arn == arn:
                return queue
        raise KeyError(arn)


#: The ``AWS::SQS::Queue`` properties that are SQS queue attributes of the same name.
QUEUE_ATTRIBUTES = {
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
}


def physical_name(stack_name: str, logical_id: str, *, lower: bool = False) -> str:
    """The name CloudFormation would give ``logical_id`` of ``stack_name`` (lower case for S3)."""
    name = f"{stack_name}-{logical_id}"
    return name.lower() if lower else name
