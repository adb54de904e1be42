"""The one way AWS clients are built: from a function's settings, once per container.

Every client gets the function's botocore configuration (explicit connect/read timeouts,
``standard`` retries with the configured attempts); this module builds none at its import: the
functions build theirs during their init (``functions/*/app.py``).

All clients of a container come from one boto3 session: a session loads botocore's endpoint and
service data once, and a second session loads it all again (two clients from two sessions took
about 1.8x the time of two from one, measured here). Creating clients from one session is not
thread-safe, so it happens under a lock (the processor builds its S3 client lazily, from a worker
thread); the clients themselves are thread-safe.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Literal, overload

import boto3

from webhook_pipeline.settings import AwsClientSettings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient

_session: boto3.session.Session | None = None
_session_lock = threading.Lock()


@overload
def aws_client(service: Literal["sqs"], settings: AwsClientSettings) -> SQSClient: ...
@overload
def aws_client(service: Literal["s3"], settings: AwsClientSettings) -> S3Client: ...
@overload
def aws_client(service: Literal["dynamodb"], settings: AwsClientSettings) -> DynamoDBClient: ...
@overload
def aws_client(
    service: Literal["secretsmanager"], settings: AwsClientSettings
) -> SecretsManagerClient: ...


def aws_client(service: str, settings: AwsClientSettings) -> Any:
    """A boto3 client of ``service`` configured by ``settings`` (timeouts, retries, pool).

    The region and credentials come from the Lambda environment as usual; an endpoint override
    (``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_<SERVICE>``) is honoured by boto3 itself.
    """
    global _session
    with _session_lock:
        if _session is None:
            _session = boto3.session.Session()
        return _session.client(service, config=settings.botocore_config())  # type: ignore[call-overload]
