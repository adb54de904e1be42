"""docs/cost.md's prose figures: how the model counts each service, the outside estimate and
what it leaves out, the ``no-redis`` trade-off and what is ours to reduce, from the same
:class:`~webhook_pipeline_ops.figures.cost.Model` as the bill."""

from __future__ import annotations

from typing import Any

from webhook_pipeline_ops.cost.aws_lambda import batch_records
from webhook_pipeline_ops.cost.dynamodb import write_units
from webhook_pipeline_ops.cost.estimate import bills
from webhook_pipeline_ops.cost.prices import DEFAULT_PRICES
from webhook_pipeline_ops.cost.sqs import ESM_LONG_POLL_SECONDS
from webhook_pipeline_ops.cost.units import SECONDS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Scenario, Usage
from webhook_pipeline_ops.figures.cost import LARGE, SMALL, Model, model, money, share, usd
from webhook_pipeline_ops.figures.render import Results, bullets, table

_DAY = 86_400


def _per_million(value: float, per_month: float = LARGE) -> str:
    return f"${money(value / per_month * 1e6)}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def units(m: Model) -> tuple[int, int]:
    """Write units of an unordered delivery (one put) and of an ordered one (the transaction)."""
    u = m.usage
    transaction = 2 * (write_units(u.delivery_item_bytes) + write_units(u.resource_item_bytes))
    return write_units(u.unordered_delivery_item_bytes), transaction


def _ttl_days(m: Model) -> str:
    return f"{m.usage.dedup_ttl_s / _DAY:.1f} days"


def modelled_requests(m: Model) -> list[str]:
    """How SQS, DynamoDB and ElastiCache are counted, with the model's quantities."""
    u, scenario = m.usage, Scenario(per_month=SMALL)
    idle = scenario.esm_pollers * SECONDS_PER_MONTH / ESM_LONG_POLL_SECONDS
    small_batch = batch_records(u, SMALL / SECONDS_PER_MONTH)
    full = (u.batch_size - 1) / u.batching_window_s
    delivery, resource = write_units(u.delivery_item_bytes), write_units(u.resource_item_bytes)
    unordered = write_units(u.unordered_delivery_item_bytes)
    floor_mb = DEFAULT_PRICES.elasticache_min_storage_gb * 1000
    return [
        "**SQS**: one `SendMessage` per delivery, one `ReceiveMessage` and one "
        "`DeleteMessageBatch` per processor invocation, and the event source mapping's long "
        f"polls on an empty queue ({scenario.esm_pollers} pollers, {ESM_LONG_POLL_SECONDS} s "
        f"each: {idle:,.0f} requests a month whatever the traffic). A batch holds the first "
        f"record plus what arrives during the {u.batching_window_s:g} s batching window, up to "
        f"{u.batch_size}: {small_batch:.1f} records at a million a month, {u.batch_size} from "
        f"about {full:.0f} webhooks a second.",
        "**DynamoDB**: a delivery from a source with a resource key and a sequence is one "
        f"`TransactWriteItems` of two items ({u.delivery_item_bytes:.0f} and "
        f"{u.resource_item_bytes:.0f} bytes): 2 x ({delivery} + {resource}) = "
        f"**{2 * (delivery + resource)} write units**. A delivery without ordering is one "
        f"conditional `PutItem`: **{unordered} write unit{'s' * (unordered > 1)}** (the "
        "processor already does this: `DynamoDBDeliveryStore.record`). Storage: each delivery "
        f"item kept for `DeliveryRetentionDays` ({u.delivery_retention_days:g}), plus "
        "DynamoDB's 100 bytes per item, with point-in-time recovery.",
        f"**ElastiCache**: {u.redis_commands_accepted} commands per accepted delivery (`SET NX "
        f"EX GET`, one `EVALSHA`), {u.redis_commands_duplicate} per duplicate, "
        f"{u.ecpu_per_command:g} ECPU each (values under 1 KB); storage is the larger of the "
        f"{floor_mb:g} MB minimum and the claims alive within the dedup TTL ({_ttl_days(m)} on "
        "average over the sources: each source's retry horizon, capped by "
        "`DedupTtlMaxSeconds`).",
    ]


def modelled_rest(m: Model) -> list[str]:
    """How X-Ray, CloudWatch, the VPC and Secrets Manager are counted, and what is not."""
    u, scenario = m.usage, Scenario(per_month=SMALL)
    return [
        "**X-Ray**: `Tracing: Active` with the default sampling rule (the first request of each "
        f"second, then {100 * scenario.xray_rate:g} %), applied to ingest and processor "
        "invocations separately (an upper bound: a processor invocation may join its "
        "producer's trace).",
        "**CloudWatch**: ingested log bytes as above; stored compressed (ratio "
        f"{scenario.log_compression:g}) for the {u.log_retention_days:g}-day retention; "
        f"{u.emf_metrics} custom metrics, {u.alarm_metrics} alarm metrics (an "
        f"anomaly-detection alarm counts 3), {u.dashboards} dashboard.",
        "**VPC**: the ingest function runs in the VPC for Redis, with SQS and Secrets Manager "
        f"interface endpoints in {u.availability_zones} AZs: "
        f"{u.interface_endpoints * u.availability_zones} endpoint-AZ hours every hour.",
        f"**Secrets Manager**: {u.sources} secrets (the example sources); each warm container "
        f"reads each secret every {scenario.secrets_max_age_s:g} s.",
        "Not counted: free tiers, data transfer between AZs (Lambda to ElastiCache), KMS calls "
        "for the AWS-managed Secrets Manager key, the replay function (operator-invoked), "
        "request payloads over 512 KB (counted twice by API Gateway), CloudWatch Logs Insights "
        "queries.",
    ]


def outside_estimate(m: Model) -> str:
    """The per-request lines the outside estimate names, per million at the large volume."""
    bill = m.at(LARGE)
    named = {
        "DynamoDB writes": usd(bill, "DynamoDB", "processor writes"),
        "logs": usd(bill, "CloudWatch", "log "),
        "API Gateway": usd(bill, "API Gateway"),
        "SQS": usd(bill, "SQS"),
        "Lambda": usd(bill, "Lambda"),
    }
    total = sum(named.values())
    parts = [
        f"{name} {_per_million(value)}" + (f" (**{share(value, total)}**)" if i < 3 else "")
        for i, (name, value) in enumerate(named.items())
    ]
    return f"**{_per_million(total)} per million**: " + ", ".join(parts)


def left_out(m: Model) -> list[str]:
    """What the outside estimate leaves out, with the model's figures."""
    small, large = m.at(SMALL), m.at(LARGE)
    claims = LARGE / SECONDS_PER_MONTH * m.usage.dedup_ttl_s
    sqs = "send + receive"
    return [
        f"X-Ray: {_per_million(usd(large, 'X-Ray'))} per million at 100 million a month, "
        f"${money(usd(small, 'X-Ray'))} a month at 1 million (with the default sampling rule, "
        "almost every request of a low-traffic stack is traced);",
        f"the claims the cache keeps for the dedup TTL ({_ttl_days(m)} on average): "
        f"{_per_million(usd(large, 'ElastiCache', 'storage above'))} per million at 100 million "
        f"a month ({claims / 1e6:.1f} million live claims of "
        f"{m.usage.redis_bytes_per_claim:.0f} bytes);",
        "DynamoDB storage and point-in-time recovery: "
        f"{_per_million(usd(large, 'DynamoDB', 'storage'))} per million;",
        f"at low volume, small batches: SQS {_per_million(usd(small, 'SQS', sqs), SMALL)} and "
        f"Lambda requests {_per_million(usd(small, 'Lambda', 'requests'), SMALL)} per million "
        f"at 1 million a month instead of {_per_million(usd(large, 'SQS', sqs))} and "
        f"{_per_million(usd(large, 'Lambda', 'requests'))};",
        f"the fixed ${money(small.fixed)} a month.",
    ]


def break_even(m: Model) -> float:
    """Webhooks a month at which ``no-redis`` costs as much as the stack as deployed (bisected
    between the small volume and 100 times the large one)."""
    low, high = SMALL, 100 * LARGE
    for _ in range(60):
        middle = (low + high) / 2
        both = bills(m.usage, Scenario(per_month=middle), DEFAULT_PRICES)
        if both["no-redis"].total < both["as deployed"].total:
            low = middle
        else:
            high = middle
    return low


def no_redis(m: Model) -> str:
    """What ``no-redis`` drops and adds, and where it breaks even."""
    small, large = m.at(SMALL), m.at(LARGE)
    bare = m.at(LARGE, "no-redis")
    gate = usd(bare, "DynamoDB", "gate writes")
    ingest = usd(bare, "Lambda", "ingest") - usd(large, "Lambda", "ingest")
    return (
        f"it drops ${money(small.fixed - m.at(SMALL, 'no-redis').fixed)} a month (the endpoints "
        "and the cache minimum) and the cache's claim storage "
        f"({_per_million(usd(large, 'ElastiCache', 'storage above'))} per million at 100 million "
        f"a month), and adds {_per_million(gate)} per million of gate writes (2 write units per "
        f"accepted delivery, 1 per duplicate) and {_per_million(ingest)} of ingest duration (a "
        "DynamoDB round trip instead of Redis). It is cheaper below about "
        f"{break_even(m) / 1e6:.0f} million webhooks a month, dearer above"
    )


def reduce(m: Model) -> dict[str, str]:
    """The figures of "What is ours to reduce", each its own block."""
    u, small, large = m.usage, m.at(SMALL), m.at(LARGE)
    lean = large.total - m.at(LARGE, "lean-logs").total
    emf = u.ingest_log_bytes_accepted - u.ingest_info_line_bytes
    return {
        "reduce-transaction": "The transaction, "
        f"{_per_million(usd(large, 'DynamoDB', 'processor writes'))} per million.",
        "reduce-items": f"{u.delivery_item_bytes:.0f} and {u.resource_item_bytes:.0f} bytes",
        "reduce-logs": f"**Logs, {_per_million(usd(large, 'CloudWatch', 'log '))} per million** "
        f"(5 lines a request: the ingest INFO line {u.ingest_info_line_bytes:.0f} bytes, its EMF "
        f"line {emf:.0f}, Lambda's START/END/REPORT {u.platform_log_bytes:.0f}, the API access "
        f"log {u.api_access_log_bytes:.0f}, the processor's INFO line "
        f"{u.processor_info_line_bytes:.0f})",
        "reduce-lean-logs": f"saves {_per_million(lean)} per million",
        "reduce-claims": "**Claims in the cache, "
        f"{_per_million(usd(large, 'ElastiCache', 'storage above'))} per million.** "
        f"{u.redis_bytes_per_claim:.0f} bytes for {_ttl_days(m)} on average each",
        "reduce-xray": f"**X-Ray, {_per_million(usd(large, 'X-Ray'))} per million, "
        f"${money(usd(small, 'X-Ray'))} a month at a million.**",
        "reduce-endpoints": "**VPC interface endpoints, "
        f"${money(usd(small, 'VPC', 'interface'))} a month.**",
        "reduce-api": f"API Gateway's {_per_million(usd(large, 'API Gateway'))} per million",
    }


def _ingest_rows(inputs: Any, u: Usage) -> list[list[str]]:
    """The measured table's rows of the ingest function."""
    accepted = inputs["phases"]["ingest_accepted_stripe"]
    duplicate = inputs["phases"]["ingest_duplicate_stripe"]
    return [
        [
            "ingest, accepted delivery",
            f"{u.ingest_ms_accepted:.1f} ms billed ({accepted['cpu']['mean_ms']:.1f} ms CPU; the "
            "rest is the wait on SQS, here the moto server)",
            f"{u.ingest_memory_mb} MB x duration",
        ],
        [
            "ingest, duplicate at the gate",
            f"{u.ingest_ms_duplicate:.1f} ms billed ({duplicate['cpu']['mean_ms']:.1f} ms CPU)",
            "",
        ],
        [
            "ingest log per invocation",
            f"{u.ingest_log_bytes_accepted:.0f} bytes accepted (one "
            f"{u.ingest_info_line_bytes:.0f}-byte INFO line + one "
            f"{u.ingest_log_bytes_accepted - u.ingest_info_line_bytes:.0f}-byte EMF line), "
            f"{u.ingest_log_bytes_duplicate:.0f} bytes duplicate",
            "CloudWatch Logs",
        ],
    ]


def measured_table(results: Results, m: Model) -> str:
    """What one webhook consumes, as measured (``cost_inputs.json``) and entered in the model."""
    inputs, u = results("cost_inputs.json"), m.usage
    items, envelopes = inputs["dynamodb_item_bytes"], inputs["envelope_bytes_mean"]
    chunks = "one 64 KiB chunk" if max(envelopes.values()) <= 64 * 1024 else "several chunks"
    metrics = sorted(name.split("/")[-1].split("[")[0] for name in inputs["emf_metrics_seen"])
    rows = [
        *_ingest_rows(inputs, u),
        [
            "processor CPU",
            f"{u.processor_ms_fixed - 0.5:.1f} ms per invocation + "
            f"{u.processor_ms_per_record:.1f} ms per record",
            f"{u.processor_memory_mb} MB x (CPU + {u.dynamodb_ms:g} ms DynamoDB wait per "
            "invocation, `--dynamodb-ms`)",
        ],
        [
            "processor log",
            f"{u.processor_log_bytes_fixed:.0f} bytes per invocation (EMF) + "
            f"{u.processor_log_bytes_per_record:.0f} bytes per record (INFO line)",
            "CloudWatch Logs",
        ],
        [
            "envelope on the queue",
            f"{envelopes['stripe']:.0f} bytes (Stripe), {envelopes['github']:.0f} bytes "
            f"(GitHub): {chunks}",
            "SQS send",
        ],
        [
            "delivery item / resource item",
            f"{items['delivery_stripe']['max']:.0f} / {items['resource']['max']:.0f} bytes "
            f"(Stripe), {items['delivery_github']['max']:.0f} bytes (GitHub, no resource)",
            "1 write unit each; x2 in a transaction",
        ],
        [
            "Redis per claim",
            f"{u.redis_bytes_per_claim:.0f} bytes (`MEMORY USAGE`), for the dedup TTL "
            f"({_ttl_days(m)} on average)",
            "ElastiCache storage",
        ],
        [
            "EMF metrics",
            f"{u.emf_metrics} ({', '.join(metrics)}) in normal operation",
            f"${DEFAULT_PRICES.metric_month:.2f} each a month",
        ],
    ]
    return table(["quantity", "measured", "enters the bill as"], "lll", rows)


def figures(results: Results) -> dict[str, str]:
    """Every prose block of docs/cost.md by name."""
    m = model(results)
    inputs = results("cost_inputs.json")
    unordered, transaction = units(m)
    return {
        "cost-measured-from": f"{inputs['deliveries_per_phase']} Stripe and "
        f"{inputs['deliveries_per_phase']} GitHub deliveries, this "
        f"{inputs['machine']['cpus']}-core machine",
        "cost-measured": measured_table(results, m),
        "cost-platform-lines": f"{m.usage.platform_log_bytes:.0f} bytes per invocation in the "
        f"text log format, plus {m.usage.xray_log_bytes:.0f} bytes for the XRAY line of a "
        "sampled invocation) and one API access log line per request "
        f"({m.usage.api_access_log_bytes:.0f} bytes: the template's format filled in)",
        "cost-modelled": bullets(modelled_requests(m) + modelled_rest(m)),
        "cost-outside-estimate": outside_estimate(m),
        "cost-left-out": bullets(left_out(m)),
        "cost-no-redis": no_redis(m),
        "cost-unordered-units": f"{_plural(unordered, 'write unit')} per delivery, not "
        f"{transaction}",
        "reduce-units": f"{_plural(unordered, 'unit')} instead of {transaction}",
        **reduce(m),
    }
