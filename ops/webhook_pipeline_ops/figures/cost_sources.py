"""docs/cost.md's inputs: where the model's quantities come from (the template's settings as
the model reads them) and the default price table, from
:mod:`webhook_pipeline_ops.cost` and template.yaml."""

from __future__ import annotations

from webhook_pipeline_ops.cost.prices import DEFAULT_PRICES, PRICES_AS_OF, PRICES_REGION
from webhook_pipeline_ops.cost.sqs import SQS_CHUNK_BYTES
from webhook_pipeline_ops.cost.usage import DYNAMODB_MS
from webhook_pipeline_ops.figures.cost import Model, model, template
from webhook_pipeline_ops.figures.render import Results, table

_MEASURED = (
    "measured on the real functions (functions/ingest/app.py and functions/processor/app.py "
    "against a real redis-server and the local stack's moto server): warm durations and CPU "
    "time, the bytes each function writes to its log per invocation, the envelope on the "
    "queue, the size of every DynamoDB item the processor writes, Redis `MEMORY USAGE` per "
    "claim, the EMF metrics emitted"
)


def sources_table(m: Model) -> str:
    """The three sources of the quantities, with the template's settings as the model read
    them."""
    u = m.usage
    cap = float(template()["Parameters"]["DedupTtlMaxSeconds"]["Default"]) / 86_400
    settings = (
        f"memory sizes, architecture ({u.architecture}), batch size ({u.batch_size}) and "
        f"batching window ({u.batching_window_s:g} s), dedup TTL (at most {cap:g} days, "
        f"`DedupTtlMaxSeconds`; {u.dedup_ttl_s / 86_400:.1f} on average over the sources), "
        f"retentions, interface endpoints and AZs, alarms ({u.alarm_metrics} alarm metrics), "
        f"the dashboard, `Tracing: {'Active' if u.tracing else 'PassThrough'}`"
    )
    rows = [
        [
            "`bench/results/cost_inputs.json`, written by `python bench/bench_cost_inputs.py`",
            _MEASURED,
        ],
        ["`template.yaml` (parameter defaults)", settings],
        ["`layers/common/sources.toml`", "the number of sources (one secret each)"],
    ]
    return table(["source", "what"], "ll", rows)


def prices_table() -> str:
    """The default price table, service by service."""
    p = DEFAULT_PRICES
    rows = [
        [
            "API Gateway HTTP API",
            f"${p.api_http_per_million:.2f} per million requests (first 300 million a month)",
        ],
        [
            "Lambda",
            f"${p.lambda_request_per_million:.2f} per million requests; "
            f"${p.lambda_gb_second_arm64:.10f} per GB-second (arm64), "
            f"${p.lambda_gb_second_x86_64:.10f} (x86_64)",
        ],
        [
            "SQS standard",
            f"${p.sqs_request_per_million:.2f} per million requests, each "
            f"{SQS_CHUNK_BYTES // 1024} KiB of a request counted as one",
        ],
        [
            "DynamoDB on-demand",
            f"${p.dynamodb_write_unit_per_million:g} per million write request units; storage "
            f"${p.dynamodb_storage_gb_month:.2f} and point-in-time recovery "
            f"${p.dynamodb_pitr_gb_month:.2f} per GB-month",
        ],
        [
            "ElastiCache Serverless (Valkey)",
            f"${p.elasticache_ecpu_per_million:g} per million ECPU; "
            f"${p.elasticache_storage_gb_hour:g} per GB-hour, at least "
            f"{p.elasticache_min_storage_gb * 1000:g} MB metered",
        ],
        [
            "CloudWatch",
            f"logs ${p.logs_ingest_gb:.2f} per GB ingested, ${p.logs_storage_gb_month:.2f} per "
            f"GB-month stored; ${p.metric_month:.2f} per custom metric a month; "
            f"${p.alarm_metric_month:.2f} per alarm metric a month; ${p.dashboard_month:.2f} per "
            "dashboard a month",
        ],
        ["X-Ray", f"${p.xray_trace_per_million:.2f} per million traces recorded"],
        [
            "S3 Standard",
            f"${p.s3_put_per_thousand:g} per 1,000 PUT, ${p.s3_get_per_thousand:g} per 1,000 GET, "
            f"${p.s3_storage_gb_month:g} per GB-month",
        ],
        [
            "VPC interface endpoint",
            f"${p.vpc_interface_endpoint_az_hour:.2f} per endpoint per AZ per hour; "
            f"${p.vpc_endpoint_data_gb:.2f} per GB processed",
        ],
        [
            "Secrets Manager",
            f"${p.secret_month:.2f} per secret a month; ${p.secrets_api_per_10k:.2f} per 10,000 "
            "calls",
        ],
    ]
    return table(["service", "price"], "ll", rows)


def figures(results: Results) -> dict[str, str]:
    """The inputs' blocks of docs/cost.md by name."""
    return {
        "cost-sources": sources_table(model(results)),
        "cost-prices-as-of": f"{PRICES_REGION} list prices as of {PRICES_AS_OF}",
        "cost-prices": prices_table(),
        "cost-dynamodb-ms": f"{DYNAMODB_MS:g} ms by default",
    }


#: Blocks from the template and the price table alone (all of them).
NOT_FROM_RESULTS = frozenset(
    {"cost-sources", "cost-prices-as-of", "cost-prices", "cost-dynamodb-ms"}
)
