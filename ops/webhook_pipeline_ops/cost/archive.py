"""The archive (docs/archive.md): the archive queue's requests, the archiver's invocations and
duration, its S3 PUTs (one object per source and hour per batch) and the archive's storage for
the retention; and the two mechanisms it was chosen over, priced for the same traffic
(:func:`alternatives`): Amazon Data Firehose with dynamic partitioning, and one S3 PUT per
source in each processor batch.

Quantities and their basis:

- archive messages: one per new delivery, the size of its archive line
  (``archive_message_bytes``, measured); the processor sends them with one ``SendMessageBatch``
  per invocation (each 64 KiB of it one request); the archiver's event source mapping receives
  them 10 to a ``ReceiveMessage`` and deletes them 10 to a ``DeleteMessageBatch``; its long polls
  on an idle queue are fixed, as the main queue's (:mod:`.sqs`);
- archiver invocations: a batch is the first message plus what arrives during the batching
  window, up to the batch size (as :func:`.aws_lambda.batch_records`);
- S3 PUTs: one per source present in a batch, sources taken as equally busy (the most objects
  for a batch: real traffic, dominated by a few sources, writes fewer); a batch that straddles
  an hour (window / 3600 of them) is left out;
- archiver duration: :data:`ARCHIVER_MS_FIXED` per invocation, the measured encoding time per
  record, :data:`S3_PUT_MS` per object; the processor's extra time: :data:`SEND_MS` per
  invocation for the ``SendMessageBatch``;
- storage: each delivery's measured gzip bytes (``archive_bytes_per_record``, 2 KB bodies)
  kept for the retention, as GB-months;
- claim-check bodies (over the inline limit): one S3 GET each by the archiver.

Athena is not included: a query costs $5 per TB it scans (a day of a source at 1 million a
month is about 20 MB), only when someone queries.

Prices: :mod:`.prices` (``sqs_request_per_million``, ``lambda_*``, ``s3_*``, ``firehose_*``).
"""

from __future__ import annotations

import math
from dataclasses import replace

from webhook_pipeline_ops.cost.aws_lambda import gb_second_price
from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.sqs import ESM_LONG_POLL_SECONDS, chunks
from webhook_pipeline_ops.cost.units import GIB, HOURS_PER_MONTH, SECONDS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Traffic, Usage

SERVICE = "Archive"
ARCHIVER_MS_FIXED = 20.0  # per invocation: parse the records, group by source and hour
S3_PUT_MS = 30.0  # one PutObject of an archive object from Lambda
SEND_MS = 15.0  # the processor's SendMessageBatch of its batch's archive messages
SQS_BATCH = 10  # messages per ReceiveMessage / DeleteMessageBatch / SendMessageBatch
FIREHOSE_RECORD_UNIT = 5 * 1024  # Firehose bills ingestion in 5 KB increments per record
FIREHOSE_BUFFER_S = 900  # the longest buffering interval: one object per partition per 15 min


def objects_per_batch(records: float, sources: int) -> float:
    """Expected distinct sources in a batch of ``records`` spread evenly over ``sources``."""
    n = max(1, sources)
    return min(records, n * (1.0 - (1.0 - 1.0 / n) ** records)) if records else 0.0


def archiver_batch(usage: Usage, new_per_second: float) -> float:
    """Mean archive messages per archiver invocation."""
    return min(
        float(usage.archiver_batch_size), 1.0 + new_per_second * usage.archiver_batching_window_s
    )


def _storage(usage: Usage, traffic: Traffic, prices: Prices) -> Line:
    gb = traffic.new * usage.archive_bytes_per_record / GIB
    gb_month = gb * usage.archive_retention_days * 24 / HOURS_PER_MONTH
    return Line(
        SERVICE,
        "storage (gzip JSON Lines)",
        gb_month,
        "GB-month",
        gb_month * prices.s3_storage_gb_month,
    )


def _processor_send(usage: Usage, traffic: Traffic, prices: Prices, item: str) -> Line:
    gbs = traffic.invocations * SEND_MS / 1000 * usage.processor_memory_mb / 1024
    return Line(SERVICE, item, gbs, "GB-s", gbs * gb_second_price(usage, prices))


def _queue_lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """The archive queue's requests: the processor's sends, the archiver's receives and
    deletes, and the idle long polls (fixed)."""
    per_invocation = traffic.new / traffic.invocations if traffic.invocations else 0.0
    message = usage.archive_message_bytes
    requests = (
        traffic.invocations * chunks(per_invocation * message)
        + traffic.new / SQS_BATCH * chunks(SQS_BATCH * message)
        + traffic.new / SQS_BATCH
    )
    idle = traffic.scenario.esm_pollers * SECONDS_PER_MONTH / ESM_LONG_POLL_SECONDS
    price = prices.sqs_request_per_million / 1e6
    return [
        Line(
            SERVICE, "archive queue send + receive + delete", requests, "requests", requests * price
        ),
        Line(SERVICE, "archive queue long polls", idle, "requests", idle * price, fixed=True),
    ]


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """The archive as deployed (archive queue + archiver); none without measured sizes."""
    if usage.archive_bytes_per_record <= 0 or not traffic.new:
        return []
    batch = archiver_batch(usage, traffic.new / SECONDS_PER_MONTH)
    invocations = traffic.new / batch
    objects = invocations * objects_per_batch(batch, usage.sources)
    ms = (
        invocations * ARCHIVER_MS_FIXED
        + traffic.new * usage.archive_encode_ms_per_record
        + objects * S3_PUT_MS
    )
    gbs = ms / 1000 * usage.archiver_memory_mb / 1024
    requests = invocations / 1e6 * prices.lambda_request_per_million
    out = [
        *_queue_lines(usage, traffic, prices),
        Line(SERVICE, "archiver requests", invocations, "requests", requests),
        Line(SERVICE, "archiver duration", gbs, "GB-s", gbs * gb_second_price(usage, prices)),
        _processor_send(usage, traffic, prices, "processor send duration"),
        Line(
            SERVICE,
            "archive object PUTs",
            objects,
            "requests",
            objects / 1000 * prices.s3_put_per_thousand,
        ),
        _storage(usage, traffic, prices),
    ]
    if traffic.large:
        gets = traffic.large / 1000 * prices.s3_get_per_thousand
        out.append(Line(SERVICE, "claim-check GETs", traffic.large, "requests", gets))
    return out


def firehose_lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """Amazon Data Firehose (Direct PUT) with dynamic partitioning by source (JQ) and hour: each
    record billed as a multiple of 5 KB; one object per source per buffering interval; the JQ
    parser billed every hour (the stream receives records every hour)."""
    message = usage.archive_message_bytes
    billed_gb = traffic.new * math.ceil(message / FIREHOSE_RECORD_UNIT) * FIREHOSE_RECORD_UNIT / GIB
    delivered_gb = traffic.new * message / GIB
    objects = min(traffic.new, usage.sources * SECONDS_PER_MONTH / FIREHOSE_BUFFER_S)
    object_price = (
        prices.firehose_partition_objects_per_thousand + prices.s3_put_per_thousand
    ) / 1000
    return [
        Line(
            "Firehose",
            "ingestion (5 KB per record)",
            billed_gb,
            "GB",
            billed_gb * prices.firehose_ingest_gb,
        ),
        Line(
            "Firehose",
            "dynamic partitioning",
            delivered_gb,
            "GB",
            delivered_gb * prices.firehose_partitioning_gb,
        ),
        Line(
            "Firehose",
            "partition objects + PUTs",
            objects,
            "objects",
            objects * object_price,
            fixed=True,
        ),
        Line(
            "Firehose",
            "JQ partition keys",
            HOURS_PER_MONTH,
            "hours",
            HOURS_PER_MONTH * prices.firehose_jq_hour,
            fixed=True,
        ),
        _processor_send(usage, traffic, prices, "processor PutRecordBatch duration"),
        _storage(usage, traffic, prices),
    ]


def direct_put_lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """The processor PUTs one object per source of each batch itself (no queue, no archiver):
    as many objects as processor invocations times their sources; the same bytes stored."""
    per_invocation = traffic.new / traffic.invocations if traffic.invocations else 0.0
    objects = traffic.invocations * objects_per_batch(per_invocation, usage.sources)
    gbs = objects * S3_PUT_MS / 1000 * usage.processor_memory_mb / 1024
    return [
        Line(
            "S3 direct",
            "object PUTs",
            objects,
            "requests",
            objects / 1000 * prices.s3_put_per_thousand,
        ),
        Line(
            "S3 direct", "processor PUT duration", gbs, "GB-s", gbs * gb_second_price(usage, prices)
        ),
        _storage(usage, traffic, prices),
    ]


MECHANISMS = {
    "archive queue + archiver (deployed)": lines,
    "Firehose, dynamic partitioning": firehose_lines,
    "S3 PUT per processor batch": direct_put_lines,
}


def alternatives(
    usage: Usage, traffic: Traffic, prices: Prices, retention_days: float = 30
) -> dict[str, list[Line]]:
    """Each mechanism's lines for ``traffic``, the archive kept ``retention_days``."""
    kept = replace(usage, archive_retention_days=retention_days)
    return {name: model(kept, traffic, prices) for name, model in MECHANISMS.items()}


def per_million(archive_lines: list[Line], traffic: Traffic) -> float:
    """USD per million webhooks of ``archive_lines`` (fixed lines included)."""
    total = sum(line.usd_month for line in archive_lines)
    return total / traffic.requests * 1e6 if traffic.requests else 0.0
