"""The archive's cost lines and its two alternatives, from a hand-built month; and the figure the
docs quote (at most $0.50 per million at 2 KB bodies, 30 days) from the committed measurement.

Expected values are written out from the inputs (quantity x list price). The inputs tell a
plausible wrong formula apart: archive messages large enough that ten take two SQS requests,
three sources (a batch of one record writes one object, not three), a retention that is not a
month, processor and archiver memory sizes that differ.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from webhook_pipeline_ops.cost import archive
from webhook_pipeline_ops.cost.estimate import traffic
from webhook_pipeline_ops.cost.prices import DEFAULT_PRICES as PRICES
from webhook_pipeline_ops.cost.usage import Scenario, Traffic

from tests.unit.test_cost_services import GIB, SCENARIO, USAGE, S

pytestmark = pytest.mark.unit

ARCHIVED = replace(
    USAGE,
    archiver_memory_mb=2048,
    archiver_batch_size=1000,
    archiver_batching_window_s=60,
    archive_retention_days=730 / 24 * 3,  # three months
    archive_bytes_per_record=700,
    archive_message_bytes=7000,  # ten of them: 70,000 bytes, two 64 KiB requests
    archive_encode_ms_per_record=0.05,
)


def month(new: float, invocations: float, large: float = 0.0) -> Traffic:
    return Traffic(SCENARIO, new, 0.0, new, new, 0.0, large, invocations, 0.0)


def by_item(lines: list[archive.Line]) -> dict[str, archive.Line]:
    return {line.item: line for line in lines}


def test_objects_per_batch_counts_the_sources_present() -> None:
    assert archive.objects_per_batch(1, 3) == pytest.approx(1)
    assert archive.objects_per_batch(0, 3) == 0
    assert archive.objects_per_batch(2, 3) == pytest.approx(3 * (1 - (2 / 3) ** 2))
    assert archive.objects_per_batch(1000, 7) == pytest.approx(7)
    assert archive.objects_per_batch(50, 1) == 1


def test_deployed_lines_quantities() -> None:
    # 100 million a month in batches of 10: the archiver's batches are full (1000)
    new = 100e6
    lines = by_item(archive.lines(ARCHIVED, month(new, new / 10), PRICES))
    queue = lines["archive queue send + receive + delete"]
    # sends: one SendMessageBatch of 10 x 7000 bytes (2 requests) per processor invocation;
    # receives of 10 (2 requests each); deletes of 10 (1 request)
    assert queue.quantity == pytest.approx(new / 10 * 2 + new / 10 * 2 + new / 10)
    assert queue.usd_month == pytest.approx(queue.quantity / 1e6 * 0.40)
    assert lines["archive queue long polls"].fixed
    assert lines["archive queue long polls"].quantity == pytest.approx(3 * S / 20)
    invocations = new / 1000
    assert lines["archiver requests"].quantity == pytest.approx(invocations)
    objects = invocations * archive.objects_per_batch(1000, 3)
    assert lines["archive object PUTs"].quantity == pytest.approx(objects)
    assert lines["archive object PUTs"].usd_month == pytest.approx(objects / 1000 * 0.005)
    ms = invocations * 20 + new * 0.05 + objects * 30
    assert lines["archiver duration"].quantity == pytest.approx(ms / 1000 * 2)  # 2048 MB
    assert lines["processor send duration"].quantity == pytest.approx(new / 10 * 15 / 1000 / 2)
    storage = lines["storage (gzip JSON Lines)"]
    assert storage.quantity == pytest.approx(new * 700 / GIB * 3)
    assert storage.usd_month == pytest.approx(storage.quantity * 0.023)
    assert "claim-check GETs" not in lines


def test_a_slow_month_closes_batches_by_the_window() -> None:
    # 1 million a month: 0.38 a second, so a 60 s window gathers 1 + 22.8 messages
    new = 1e6
    lines = by_item(archive.lines(ARCHIVED, month(new, new, large=1000), PRICES))
    batch = 1 + new / S * 60
    assert lines["archiver requests"].quantity == pytest.approx(new / batch)
    objects = new / batch * archive.objects_per_batch(batch, 3)
    assert lines["archive object PUTs"].quantity == pytest.approx(objects)
    # one send (7000 bytes: one request) per processor invocation of one record
    queue = lines["archive queue send + receive + delete"]
    assert queue.quantity == pytest.approx(new + new / 10 * 2 + new / 10)
    assert lines["claim-check GETs"].quantity == 1000


def test_no_lines_without_a_measured_size() -> None:
    assert (
        archive.lines(replace(ARCHIVED, archive_bytes_per_record=0), month(1e6, 1e5), PRICES) == []
    )


def test_firehose_bills_each_record_in_5_kb_steps_and_jq_every_hour() -> None:
    new = 10e6
    lines = by_item(archive.firehose_lines(ARCHIVED, month(new, new / 10), PRICES))
    ingestion = lines["ingestion (5 KB per record)"]
    assert ingestion.quantity == pytest.approx(new * 10 * 1024 / GIB)  # 7000 bytes -> 10 KB
    small = replace(ARCHIVED, archive_message_bytes=3000)
    billed = by_item(archive.firehose_lines(small, month(new, new / 10), PRICES))
    assert billed["ingestion (5 KB per record)"].quantity == pytest.approx(new * 5 * 1024 / GIB)
    assert lines["dynamic partitioning"].quantity == pytest.approx(new * 7000 / GIB)
    assert lines["JQ partition keys"].usd_month == pytest.approx(730 * 0.07)
    assert lines["partition objects + PUTs"].quantity == pytest.approx(3 * S / 900)


def test_direct_put_writes_an_object_per_source_of_every_processor_batch() -> None:
    new = 10e6
    lines = by_item(archive.direct_put_lines(ARCHIVED, month(new, new / 10), PRICES))
    objects = new / 10 * archive.objects_per_batch(10, 3)
    assert lines["object PUTs"].quantity == pytest.approx(objects)
    # at least one PUT per ten deliveries: $0.50 per million in PUTs alone
    assert lines["object PUTs"].usd_month / (new / 1e6) >= 0.5


def test_alternatives_keep_the_archive_the_days_asked() -> None:
    counts = month(1e6, 1e5)
    for lines in archive.alternatives(ARCHIVED, counts, PRICES, retention_days=730 / 24).values():
        (storage,) = [line for line in lines if line.item.startswith("storage")]
        assert storage.quantity == pytest.approx(1e6 * 700 / GIB)


def test_the_documented_figure_meets_the_target_at_full_batches() -> None:
    # The committed measurement (bench/results/archive_size.json), the template, the prices
    from webhook_pipeline_ops.cost.inputs import load_usage

    usage = load_usage(None, None, None)
    assert usage.archive_bytes_per_record > 0
    counts = traffic(usage, Scenario(per_month=100e6))
    deployed = archive.alternatives(usage, counts, PRICES)["archive queue + archiver (deployed)"]
    assert archive.per_million(deployed, counts) <= 0.50
    body = math.ceil(usage.archive_message_bytes)
    assert body > 2048  # a 2 KB body and its record
