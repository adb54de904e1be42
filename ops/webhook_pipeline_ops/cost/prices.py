"""The price table: dated list prices in USD for one region, free tiers left out.

Each service module names the AWS pricing page its prices come from; ``--price NAME=USD``
(:func:`parse_prices`) overrides one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, replace

from webhook_pipeline_ops.aws import OpsError

PRICES_AS_OF = "2025-06-01"
PRICES_REGION = "us-east-1"


@dataclass(frozen=True)
class Prices:
    """List prices in USD (us-east-1 by default; free tiers not deducted).

    Units are in the field names: ``*_per_million`` requests or units, ``*_gb_month`` per GB
    (2^30 bytes) stored for a month, ``*_hour`` per hour.
    """

    api_http_per_million: float = 1.00  # HTTP API, first 300 million a month
    lambda_request_per_million: float = 0.20
    lambda_gb_second_arm64: float = 0.0000133334
    lambda_gb_second_x86_64: float = 0.0000166667
    sqs_request_per_million: float = 0.40  # standard queue, per 64 KiB chunk
    dynamodb_write_unit_per_million: float = 0.625  # on-demand WRU
    dynamodb_storage_gb_month: float = 0.25
    dynamodb_pitr_gb_month: float = 0.20  # continuous backups
    elasticache_ecpu_per_million: float = 0.0023  # Serverless, Valkey
    elasticache_storage_gb_hour: float = 0.084  # Serverless, Valkey
    elasticache_min_storage_gb: float = 0.1  # Valkey meters at least 100 MB
    logs_ingest_gb: float = 0.50  # CloudWatch Logs, Standard class
    logs_storage_gb_month: float = 0.03  # archived (compressed) bytes
    metric_month: float = 0.30  # custom metric, first 10,000
    alarm_metric_month: float = 0.10  # standard resolution, per metric in the alarm
    dashboard_month: float = 3.00  # beyond the account's first three
    xray_trace_per_million: float = 5.00  # traces recorded
    s3_put_per_thousand: float = 0.005
    s3_get_per_thousand: float = 0.0004
    s3_storage_gb_month: float = 0.023
    vpc_interface_endpoint_az_hour: float = 0.01
    vpc_endpoint_data_gb: float = 0.01
    secret_month: float = 0.40
    secrets_api_per_10k: float = 0.05
    # Amazon Data Firehose (the archive's alternative; https://aws.amazon.com/firehose/pricing/)
    firehose_ingest_gb: float = 0.029  # Direct PUT, first 500 TB, records rounded up to 5 KB
    firehose_partitioning_gb: float = 0.020  # dynamic partitioning, GB delivered
    firehose_partition_objects_per_thousand: float = 0.005  # dynamic partitioning, S3 objects
    firehose_jq_hour: float = 0.07  # JQ processing of the partition keys, per hour


DEFAULT_PRICES = Prices()


def parse_prices(overrides: Sequence[str], base: Prices = DEFAULT_PRICES) -> Prices:
    """``base`` with ``NAME=USD`` overrides applied.

    Raises
    ------
    OpsError
        Unknown price name or a value that is not a non-negative number (exit code 2).
    """
    names = {f.name for f in dataclasses.fields(Prices)}
    changes: dict[str, float] = {}
    for item in overrides:
        name, _, value = item.partition("=")
        if name not in names:
            raise OpsError(f"unknown price {name!r} (see --list-prices)", exit_code=2)
        try:
            changes[name] = float(value)
        except ValueError:
            raise OpsError(f"price {name} must be a number, got {value!r}", exit_code=2) from None
        if changes[name] < 0:
            raise OpsError(f"price {name} must not be negative", exit_code=2)
    return replace(base, **changes)
