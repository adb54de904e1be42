"""An archive bucket on moto for the console's Archive page tests (route and browser), written with
:func:`webhook_pipeline.archive.record.encode_object` as the archiver writes it.

What it holds (hour 2026-03-01 12 UTC unless said otherwise):

- ``stripe``: :data:`STRIPE_COUNT` deliveries ``evt_000`` .. ``evt_249``, each archived twice (a
  ``retry`` attempt, then the final one, in two objects): event type ``invoice.paid`` for even
  numbers and ``charge.succeeded`` for odd ones, outcome ``stale`` for multiples of 10 else
  ``applied``, resource key ``cus_<n % 7>``, sequence ``n``, body ``{"id", "amount": n, ...}``;
- ``stripe`` ``evt_script``: a body and a header with markup (``<script>``, ``<b>``);
- ``stripe`` ``late_1``: received at 13:30 (outside a 12:00..13:00 window);
- ``github`` ``evt_007`` (the id of a stripe delivery, another body) and ``gh_bin`` (bytes that
  are not UTF-8, with ``<script>`` in them);
- two corrupt objects under ``stripe``'s hour 12: bytes that are not gzip, and an object whose
  line 2 is not a record (its lines 1 and 3 are ``evt_good_1``/``evt_good_2``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook_pipeline.archive.record import (
    ArchiveRecord,
    encode_object,
    format_time,
    hour_of,
    object_key,
)
from webhook_pipeline.envelope import sha256_hex

BUCKET = "stk-archive"
HOUR = datetime(2026, 3, 1, 12, tzinfo=UTC)
STRIPE_COUNT = 250
SCRIPT = "</pre><script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
SCRIPT_BODY = json.dumps({"note": SCRIPT, "amount": 1}).encode()
BINARY_BODY = b"\xff\xfe\x00<script>\x80binary"
GARBAGE_KEY = (
    f"archive/source=stripe/hour={hour_of(HOUR)}/20260301T125900000000Z-{'e' * 32}.jsonl.gz"
)
BAD_LINE_KEY = (
    f"archive/source=stripe/hour={hour_of(HOUR)}/20260301T125900000000Z-{'f' * 32}.jsonl.gz"
)


def record(
    source: str,
    delivery_id: str,
    body: bytes,
    at: datetime,
    *,
    outcome: str = "applied",
    archived_after: float = 1.0,
    **fields: Any,
) -> ArchiveRecord:
    """One archived delivery of ``source`` received at ``at``."""
    values: dict[str, Any] = {
        "source": source,
        "provider": source,
        "delivery_id": delivery_id,
        "event_type": "invoice.paid",
        "received_at": format_time(at),
        "verified_with": "current",
        "body_sha256": sha256_hex(body),
        "body_size": len(body),
        "headers": {"content-type": "application/json", f"{source}-signature": "[redacted]"},
        "signed_headers": {f"{source}-signature": "[redacted]"},
        "outcome": outcome,
        "archived_at": format_time(at + timedelta(seconds=archived_after)),
        "message_id": f"m-{delivery_id}",
        **ArchiveRecord.body_fields(body),
    }
    values.update(fields)
    return ArchiveRecord.model_validate(values)


def stripe_body(n: int) -> bytes:
    return json.dumps({"id": f"evt_{n:03d}", "amount": n, "currency": "eur"}).encode()


def stripe_records() -> list[ArchiveRecord]:
    """The ``evt_NNN`` deliveries' final attempts."""
    return [
        record(
            "stripe",
            f"evt_{n:03d}",
            stripe_body(n),
            HOUR + timedelta(seconds=10 * n),
            event_type="invoice.paid" if n % 2 == 0 else "charge.succeeded",
            outcome="stale" if n % 10 == 0 else "applied",
            resource_key=f"cus_{n % 7}",
            sequence=n,
            archived_after=5.0,
        )
        for n in range(STRIPE_COUNT)
    ]


def put(s3: Any, source: str, records: list[ArchiveRecord], stamp: datetime) -> None:
    key = object_key(source, hour_of(records[0].received), stamp)
    s3.put_object(Bucket=BUCKET, Key=key, Body=encode_object(records))


def fill_archive(s3: Any) -> None:
    """Create :data:`BUCKET` and write the objects of the module docstring."""
    s3.create_bucket(Bucket=BUCKET)
    finals = stripe_records()
    retries = [
        r.model_copy(update={"outcome": "retry", "archived_at": format_time(HOUR)}) for r in finals
    ]
    put(s3, "stripe", retries, HOUR + timedelta(minutes=1))
    put(s3, "stripe", finals, HOUR + timedelta(minutes=50))
    script = record(
        "stripe",
        "evt_script",
        SCRIPT_BODY,
        HOUR + timedelta(minutes=55),
        event_type="note.created",
        headers={"user-agent": "<b>bold</b>", "stripe-signature": "[redacted]"},
        replay_count=2,
        gate="bypassed",
    )
    late = record("stripe", "late_1", b'{"late": true}', HOUR + timedelta(minutes=90))
    put(s3, "stripe", [script], HOUR + timedelta(minutes=56))
    put(s3, "stripe", [late], HOUR + timedelta(minutes=91))
    github = [
        record("github", "evt_007", b'{"github-body": 7}', HOUR + timedelta(minutes=2)),
        record(
            "github", "gh_bin", BINARY_BODY, HOUR + timedelta(minutes=3), verified_with="previous"
        ),
    ]
    put(s3, "github", github, HOUR + timedelta(minutes=4))
    s3.put_object(Bucket=BUCKET, Key=GARBAGE_KEY, Body=b"this is not gzip")
    good = [
        record("stripe", "evt_good_1", b"{}", HOUR + timedelta(minutes=57)),
        record("stripe", "evt_good_2", b"[]", HOUR + timedelta(minutes=58)),
    ]
    lines = encode_object(good)
    import gzip

    text = gzip.decompress(lines).decode().splitlines()
    broken = "\n".join([text[0], '{"source": "stripe", "delivery_id": 5}', text[1]]) + "\n"
    s3.put_object(Bucket=BUCKET, Key=BAD_LINE_KEY, Body=gzip.compress(broken.encode()))
