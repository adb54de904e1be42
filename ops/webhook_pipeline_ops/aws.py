"""Connection options, resource discovery and AWS clients shared by the CLI's AWS commands.

Where the CLI connects: default boto3 credentials and region, ``--profile``/``--region``;
``--endpoint-url`` (or boto3's own ``AWS_ENDPOINT_URL``) for the local stack's moto server.

Where the resources are found, first hit wins per resource:

1. explicit ``--queue-url``, ``--dlq-url``, ``--table``, ``--payload-bucket``,
   ``--function-name``, ``--archive-bucket`` (each command offers only the ones it uses);
2. ``--local``: the local stack's ``outputs.json`` (in ``.local-stack/`` or
   ``$WEBHOOK_PIPELINE_LOCAL_DIR``), which also gives the endpoint URL and region;
3. ``--stack NAME``: the CloudFormation stack's outputs ``MainQueueUrl``,
   ``DeadLetterQueueUrl``, ``DeliveriesTableName``, ``PayloadBucketName``,
   ``ReplayFunctionName``, ``ArchiveBucketName``;
4. environment: ``WEBHOOK_PIPELINE_QUEUE_URL``, ``WEBHOOK_PIPELINE_DLQ_URL``,
   ``WEBHOOK_PIPELINE_TABLE``, ``WEBHOOK_PIPELINE_PAYLOAD_BUCKET``,
   ``WEBHOOK_PIPELINE_REPLAY_FUNCTION``, ``WEBHOOK_PIPELINE_ARCHIVE_BUCKET``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

if TYPE_CHECKING:  # boto3 is imported by the commands that connect, not by ``--help``
    from botocore.config import Config
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient

#: Stack output key -> resource attribute.
STACK_OUTPUTS = {
    "MainQueueUrl": "queue_url",
    "DeadLetterQueueUrl": "dlq_url",
    "DeliveriesTableName": "table",
    "PayloadBucketName": "payload_bucket",
    "ReplayFunctionName": "replay_function",
    "ArchiveBucketName": "archive_bucket",
    "SecretsPrefix": "secrets_prefix",
}
#: Environment variable -> resource attribute.
ENVIRONMENT = {
    "WEBHOOK_PIPELINE_QUEUE_URL": "queue_url",
    "WEBHOOK_PIPELINE_DLQ_URL": "dlq_url",
    "WEBHOOK_PIPELINE_TABLE": "table",
    "WEBHOOK_PIPELINE_PAYLOAD_BUCKET": "payload_bucket",
    "WEBHOOK_PIPELINE_REPLAY_FUNCTION": "replay_function",
    "WEBHOOK_PIPELINE_ARCHIVE_BUCKET": "archive_bucket",
    "WEBHOOK_PIPELINE_SECRETS_PREFIX": "secrets_prefix",
}
#: How each resource can be given (for error messages).
HOW_TO_GIVE = {
    "queue_url": "--queue-url, --stack, --local or WEBHOOK_PIPELINE_QUEUE_URL",
    "dlq_url": "--dlq-url, --stack, --local or WEBHOOK_PIPELINE_DLQ_URL",
    "table": "--table, --stack, --local or WEBHOOK_PIPELINE_TABLE",
    "payload_bucket": "--payload-bucket, --stack, --local or WEBHOOK_PIPELINE_PAYLOAD_BUCKET",
    "replay_function": "--function-name, --stack or WEBHOOK_PIPELINE_REPLAY_FUNCTION",
    "archive_bucket": "--archive-bucket, --stack, --local or WEBHOOK_PIPELINE_ARCHIVE_BUCKET",
    "secrets_prefix": "--secrets-prefix, --stack, --local or WEBHOOK_PIPELINE_SECRETS_PREFIX",
}
LABELS = {
    "queue_url": "main queue URL",
    "dlq_url": "dead-letter queue URL",
    "table": "deliveries table name",
    "payload_bucket": "payload (claim-check) bucket name",
    "replay_function": "replay function name",
    "archive_bucket": "archive bucket name",
    "secrets_prefix": "secrets prefix",
}


class OpsError(Exception):
    """An expected operational failure: printed as one line, exit code ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


#: Resource options: attribute -> (flag, help).
RESOURCE_OPTIONS = {
    "queue_url": ("--queue-url", "main queue URL"),
    "dlq_url": ("--dlq-url", "dead-letter queue URL"),
    "table": ("--table", "deliveries table name"),
    "payload_bucket": ("--payload-bucket", "payload (claim-check) bucket name"),
    "replay_function": ("--function-name", "replay function name or ARN"),
    "archive_bucket": ("--archive-bucket", "archive bucket name"),
    "secrets_prefix": ("--secrets-prefix", "Secrets Manager name prefix of the source secrets"),
}
#: What most AWS commands may use.
DEFAULT_RESOURCES = ("queue_url", "dlq_url", "table", "replay_function")


def common_options(
    resources: tuple[str, ...] = DEFAULT_RESOURCES, json_output: bool | None = True
) -> argparse.ArgumentParser:
    """A parent parser with the connection, resource and output options of AWS commands.

    Parameters
    ----------
    resources : tuple[str, ...]
        The resource options the command uses (keys of :data:`RESOURCE_OPTIONS`); the others
        are not offered, so ``--help`` lists only options that apply.
    json_output : bool | None
        ``True``: offer ``--json``; ``None``: accept ``--json`` without listing it (a command
        whose output is always JSON); ``False``: no ``--json``.
    """
    parent = argparse.ArgumentParser(add_help=False)
    conn = parent.add_argument_group("connection")
    conn.add_argument("--region", help="AWS region (default: the configured one)")
    conn.add_argument("--profile", help="AWS named profile (default: the default chain)")
    conn.add_argument(
        "--endpoint-url",
        help="AWS endpoint, e.g. the local stack's moto server (default: $AWS_ENDPOINT_URL)",
    )
    res = parent.add_argument_group("resources")
    res.add_argument("--stack", metavar="NAME", help="read resources from this stack's outputs")
    res.add_argument(
        "--local",
        action="store_true",
        help="use the local stack (.local-stack/outputs.json or $WEBHOOK_PIPELINE_LOCAL_DIR)",
    )
    for name in resources:
        flag, text = RESOURCE_OPTIONS[name]
        res.add_argument(flag, dest=name, help=text)
    if json_output is not False:
        out = parent.add_argument_group("output")
        out.add_argument(
            "--json",
            action="store_true",
            help="machine-readable JSON on stdout" if json_output else argparse.SUPPRESS,
        )
    return parent


@dataclass
class Resources:
    """The pipeline's resources as found (``None`` = not given anywhere)."""

    queue_url: str | None = None
    dlq_url: str | None = None
    table: str | None = None
    payload_bucket: str | None = None
    replay_function: str | None = None
    archive_bucket: str | None = None
    secrets_prefix: str | None = None
    origin: dict[str, str] = field(default_factory=dict)

    def require(self, name: str) -> str:
        """The resource ``name``, or :class:`OpsError` saying how to give it."""
        value = getattr(self, name)
        if not value:
            raise OpsError(f"no {LABELS[name]}: give it with {HOW_TO_GIVE[name]}")
        return str(value)

    def fill(self, values: dict[str, str | None], origin: str) -> None:
        for name, value in values.items():
            if value and not getattr(self, name):
                setattr(self, name, value)
                self.origin[name] = origin


class Aws:
    """One boto3 session and lazily created clients for a CLI run.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options of :func:`common_options`.
    """

    #: Client configuration: short connect timeout, standard retries.
    CONFIG_OPTIONS: ClassVar[dict[str, Any]] = {
        "connect_timeout": 3,
        "read_timeout": 30,
        "retries": {"mode": "standard", "max_attempts": 3},
    }

    def __init__(self, args: argparse.Namespace) -> None:
        import boto3
        from botocore.exceptions import ProfileNotFound

        self.args = args
        self.local_outputs = _local_outputs() if getattr(args, "local", False) else {}
        self.endpoint_url: str | None = args.endpoint_url or self.local_outputs.get("EndpointUrl")
        region = args.region or self.local_outputs.get("Region")
        try:
            self.session = boto3.session.Session(profile_name=args.profile, region_name=region)
        except ProfileNotFound as exc:
            raise OpsError(str(exc)) from None
        if self.session.region_name is None:
            if not (getattr(args, "local", False) or self.endpoint_url):
                raise OpsError("no AWS region: pass --region or set AWS_REGION")
            self.session = boto3.session.Session(profile_name=args.profile, region_name="us-east-1")
        # The local stack's moto server accepts any credentials: do not require real ones there.
        local = getattr(args, "local", False) or bool(self.endpoint_url)
        self._fake_credentials = local and self.session.get_credentials() is None
        self._clients: dict[str, Any] = {}
        self._resources: Resources | None = None

    @overload
    def client(self, service: Literal["sqs"], config: Config | None = None) -> SQSClient: ...
    @overload
    def client(self, service: Literal["s3"], config: Config | None = None) -> S3Client: ...
    @overload
    def client(
        self, service: Literal["dynamodb"], config: Config | None = None
    ) -> DynamoDBClient: ...
    @overload
    def client(
        self, service: Literal["secretsmanager"], config: Config | None = None
    ) -> SecretsManagerClient: ...
    @overload
    def client(
        self, service: Literal["cloudwatch"], config: Config | None = None
    ) -> CloudWatchClient: ...
    @overload
    def client(
        self, service: Literal["logs"], config: Config | None = None
    ) -> CloudWatchLogsClient: ...
    @overload
    def client(
        self, service: Literal["cloudformation"], config: Config | None = None
    ) -> CloudFormationClient: ...
    @overload
    def client(self, service: Literal["lambda"], config: Config | None = None) -> LambdaClient: ...

    def client(self, service: str, config: Config | None = None) -> Any:
        """The ``service`` client (created once)."""
        if service not in self._clients:
            from botocore.config import Config

            kwargs: dict[str, Any] = {"config": config or Config(**self.CONFIG_OPTIONS)}
            if self.endpoint_url:
                kwargs["endpoint_url"] = self.endpoint_url
            if self._fake_credentials:
                kwargs.update(aws_access_key_id="testing", aws_secret_access_key="testing")  # noqa: S106
            factory: Any = self.session.client
            self._clients[service] = factory(service, **kwargs)
        return self._clients[service]

    @property
    def resources(self) -> Resources:
        """The resources, resolved once (see the module docstring for the order)."""
        if self._resources is None:
            args = self.args
            found = Resources()
            found.fill({name: getattr(args, name, None) for name in RESOURCE_OPTIONS}, "option")
            if args.local:
                found.fill(_from_outputs(self.local_outputs), "local stack")
            if args.stack:
                found.fill(_from_outputs(self._stack_outputs(args.stack)), f"stack {args.stack}")
            found.fill({attr: os.environ.get(env) for env, attr in ENVIRONMENT.items()}, "env")
            self._resources = found
        return self._resources

    def _stack_outputs(self, stack: str) -> dict[str, str]:
        from botocore.exceptions import ClientError

        try:
            response = self.client("cloudformation").describe_stacks(StackName=stack)
        except ClientError as exc:
            raise OpsError(f"cannot read stack {stack!r}: {describe_aws_error(exc)}") from None
        stacks = response.get("Stacks", [])
        if not stacks:
            raise OpsError(f"stack {stack!r} not found")
        return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def _from_outputs(outputs: dict[str, str]) -> dict[str, str | None]:
    return {attr: outputs.get(key) for key, attr in STACK_OUTPUTS.items()}


def local_outputs_path() -> Path:
    """Where the local stack writes its outputs."""
    from webhook_pipeline_ops.local import OUTPUTS_FILE, state_dir

    return state_dir() / OUTPUTS_FILE


def _local_outputs() -> dict[str, str]:
    path = local_outputs_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise OpsError(
            f"{path} not found: start the local stack first (webhook-pipeline local run)"
        ) from None
    except (OSError, ValueError) as exc:
        raise OpsError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise OpsError(f"{path} is not a JSON object")
    return {str(k): str(v) for k, v in data.items() if v is not None}


def describe_aws_error(exc: Exception) -> str:
    """One line for an AWS error, with a hint for the usual causes."""
    if not is_aws_error(exc):
        return f"{type(exc).__name__}: {exc}"
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )

    if isinstance(exc, EndpointConnectionError):
        return (
            f"cannot connect to {exc.kwargs.get('endpoint_url', 'the endpoint')}: is the local "
            "stack running (webhook-pipeline local run), or is --endpoint-url right?"
        )
    if isinstance(exc, NoCredentialsError):
        return "no AWS credentials: configure them, pass --profile, or use --local"
    if isinstance(exc, NoRegionError):
        return "no AWS region: pass --region or set AWS_REGION"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        operation = getattr(exc, "operation_name", "call")
        return f"{operation} failed: {error.get('Code', 'Error')}: {error.get('Message', '')}"
    if isinstance(exc, BotoCoreError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def is_aws_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a botocore error (without importing botocore: none can be raised
    before botocore is imported)."""
    if "botocore.exceptions" not in sys.modules:
        return False
    from botocore.exceptions import BotoCoreError, ClientError

    return isinstance(exc, BotoCoreError | ClientError)
