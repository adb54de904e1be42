"""The one way AWS clients are built: from a function's settings, once per container.

Every client gets the function's botocore configuration (explicit connect/read timeouts,
``standard`` retries with the configured attempts); this module builds none at its import: the
functions build theirs during their init (``functions/*/app.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

import boto3

from webhook_pipeline.settings import AwsClientSettings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient


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
    return boto3.session.Session().client(service, config=settings.botocore_config())  # type: ignore[call-overload]
