"""Archive object size benchmark (not a test): how small an archived delivery of a 2 KB body is.

Builds :class:`~webhook_pipeline.archive.record.ArchiveRecord` lines as the archiver writes them
for deliveries of the sources ``sources.toml`` deploys (each provider's own sample body and
headers, signed with its dev secret; the body grown to 2 KB with line items whose ids are random,
so the bodies of one object are as alike as real events of one source and no more), then encodes
them with :func:`~webhook_pipeline.archive.record.encode_object`, the archiver's encoder:

- ``one source``: objects of ``--batch`` records of one source (a busy source's hour);
- ``batch over all sources``: one archiver batch of ``--batch`` records spread evenly over the
  sources, one object per source (what the cost model assumes: the smaller objects compress a
  little less).

Reported: mean body bytes, mean archive line bytes (the JSON record, also the size of an archive
message on the queue), and per case the objects, gzip bytes, bytes per record and the ratios to
the body and to the line; the encoder's CPU time per record.

Run: ``.venv/bin/python bench/bench_archive_size.py [--quick]``; figures go to
``bench/results/archive_size.json`` (``--quick``: ``archive_size.quick.json``, git-ignored).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webhook_pipeline.archive.record import (  # noqa: E402
    ArchiveRecord,
    encode_object,
    format_time,
)
from webhook_pipeline.envelope import sha256_hex  # noqa: E402
from webhook_pipeline_ops.simulator.deliveries import (  # noqa: E402
    example_sources,
    signed_delivery,
)

BODY_BYTES = 2048
WORDS = [
    "subscription",
    "invoice",
    "payment",
    "refund",
    "customer",
    "order",
    "shipment",
    "item",
    "plan",
    "renewal",
    "discount",
    "annual",
    "monthly",
    "premium",
    "basic",
    "storage",
    "seats",
    "license",
    "support",
    "addon",
    "credit",
]


def _grown(body: bytes, rng: random.Random, target: int) -> bytes:
    """``body`` (a JSON object) with line items added until it is ``target`` bytes or more."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not isinstance(doc, dict):
        return body
    items: list[dict[str, Any]] = []
    doc["line_items"] = items
    while len(json.dumps(doc).encode()) < target:
        items.append(
            {
                "id": "li_" + "".join(rng.choices(string.ascii_letters + string.digits, k=24)),
                "description": " ".join(rng.choices(WORDS, k=3)),
                "amount": rng.randrange(100, 100_000),
                "currency": rng.choice(("usd", "eur", "gbp")),
                "quantity": rng.randrange(1, 5),
            }
        )
    return json.dumps(doc).encode()


def record(source: Any, rng: random.Random, at: datetime, sequence: int) -> ArchiveRecord:
    """One archived delivery of ``source`` received at ``at``, its body grown to 2 KB."""
    delivery = signed_delivery(source, resource=f"res_{rng.randrange(50)}", sequence=sequence)
    body = _grown(delivery.body, rng, BODY_BYTES)
    headers = {k.lower(): v for k, v in delivery.headers.items()}
    signed = {k: v for k, v in headers.items() if "signature" in k or "timestamp" in k}
    return ArchiveRecord(
        source=source.name,
        provider=source.provider.name,
        delivery_id=delivery.delivery_id,
        event_type="invoice.paid",
        resource_key=f"res_{rng.randrange(50)}",
        sequence=sequence,
        received_at=format_time(at),
        verified_with="current",
        body_sha256=sha256_hex(body),
        body_size=len(body),
        headers={**headers, "user-agent": "Sender/1.0", "content-type": "application/json"},
        signed_headers=signed,
        **ArchiveRecord.body_fields(body),
        outcome="applied",
        archived_at=format_time(at + timedelta(milliseconds=rng.randrange(50, 2000))),
        message_id=str(uuid.UUID(int=rng.getrandbits(128))),
        receive_count=1,
    )


def measure(groups: list[list[ArchiveRecord]]) -> dict[str, Any]:
    """Objects, gzip bytes and ratios of encoding each group as one object."""
    records = sum(len(g) for g in groups)
    started = time.process_time()
    sizes = [len(encode_object(g)) for g in groups]
    cpu_ms = (time.process_time() - started) * 1000
    lines = sum(len(r.to_line().encode()) + 1 for g in groups for r in g)
    bodies = sum(r.body_size for g in groups for r in g)
    return {
        "objects": len(groups),
        "records": records,
        "gzip_bytes": sum(sizes),
        "bytes_per_record": round(sum(sizes) / records, 1),
        "ratio_to_body": round(bodies / sum(sizes), 2),
        "ratio_to_line": round(lines / sum(sizes), 2),
        "encode_cpu_ms_per_record": round(cpu_ms / records, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000, help="records per archiver batch")
    parser.add_argument("--quick", action="store_true", help="batches of 200")
    args = parser.parse_args()
    batch = 200 if args.quick else args.batch
    rng = random.Random(23)
    sources = [s for s in example_sources().values() if s.enabled]
    deployed = sorted(s.name for s in sources)
    from webhook_pipeline.sources import load_sources

    in_file = [s for s in sources if s.name in load_sources()] or sources
    at = datetime(2026, 12, 1, 10, tzinfo=UTC)
    one = in_file[0]
    one_source = [
        [record(one, rng, at + timedelta(seconds=i), i) for i in range(batch)] for _ in range(2)
    ]
    spread: dict[str, list[ArchiveRecord]] = {}
    for i in range(batch):
        source = in_file[i % len(in_file)]
        spread.setdefault(source.name, []).append(record(source, rng, at, i))
    all_records = [r for g in one_source for r in g] + [r for g in spread.values() for r in g]
    result = {
        "command": " ".join([".venv/bin/python", "bench/bench_archive_size.py", *sys.argv[1:]]),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "batch": batch,
        "sources": sorted(s.name for s in in_file),
        "catalogue_sources": len(deployed),
        "body_bytes_mean": round(statistics.fmean(r.body_size for r in all_records), 1),
        "line_bytes_mean": round(
            statistics.fmean(len(r.to_line().encode()) + 1 for r in all_records), 1
        ),
        "cases": [
            {"case": f"one source ({one.name})", **measure(one_source)},
            {"case": "batch over all sources", **measure(list(spread.values()))},
        ],
    }
    name = "archive_size.quick.json" if args.quick else "archive_size.json"
    out = ROOT / "bench" / "results" / name
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
