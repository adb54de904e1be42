"""An envelope rebuilt from an archived delivery carries what ingest recorded about it."""

from __future__ import annotations

import hashlib

from webhook_pipeline.archive.record import ArchiveRecord
from webhook_pipeline.envelope import Reprocess
from webhook_pipeline.replay.archive_envelopes import envelope_from_record

BODY = b'{"id": "evt_1", "type": "invoice.paid"}'


def archived(**fields: object) -> ArchiveRecord:
    return ArchiveRecord.model_validate(
        {
            "source": "stripe-live",
            "provider": "stripe",
            "delivery_id": "evt_1",
            "event_type": "invoice.paid",
            "resource_key": "in_1",
            "sequence": 17,
            "received_at": "2026-12-01T07:00:00.000000Z",
            "verified_with": "previous",
            "body_sha256": hashlib.sha256(BODY).hexdigest(),
            "body_size": len(BODY),
            "headers": {"user-agent": "Stripe/1.0"},
            "signed_headers": {"stripe-signature": "[redacted]"},
            "body": BODY.decode(),
            "outcome": "applied",
            "archived_at": "2026-12-01T07:00:01.000000Z",
            "replay_count": 2,
        }
        | fields
    )


def test_the_rebuilt_envelope_keeps_the_verdict_and_the_signed_metadata() -> None:
    envelope = envelope_from_record(
        archived(), BODY, inline_body_max_bytes=1000, reprocess=Reprocess(generation=3, job="j")
    )
    assert (envelope.provider, envelope.verified_with) == ("stripe", "previous")
    assert envelope.signed_headers == {"stripe-signature": "[redacted]"}
    assert (envelope.resource_key, envelope.sequence, envelope.event_type) == (
        "in_1",
        17,
        "invoice.paid",
    )
    assert (envelope.gate, envelope.replay_count) == ("replayed", 3)
    assert envelope.reprocess == Reprocess(generation=3, job="j")


def test_a_verdict_the_envelope_does_not_know_is_left_out_not_refused() -> None:
    envelope = envelope_from_record(
        archived(verified_with="secret-7"), BODY, inline_body_max_bytes=1000
    )
    assert envelope.verified_with is None and envelope.provider == "stripe"


def test_where_is_part_of_what_a_resumed_job_must_repeat() -> None:
    from webhook_pipeline.replay.archive_request import ArchiveReplayRequest

    base = {"mode": "reprocess", "start": "2026-12-01T00:00:00Z", "end": "2026-12-02T00:00:00Z"}
    plain = ArchiveReplayRequest.parse(base)
    narrowed = ArchiveReplayRequest.parse(base | {"where": ["amount >= 1000"]})
    assert plain.fingerprint() != narrowed.fingerprint()
    assert len(narrowed.archive_filter().where) == 1


def test_a_record_is_found_by_its_key_even_without_identity_attributes(aws: None) -> None:
    """``recorded_outcomes`` reads the key too: a record holding only its key and outcome (an
    item written by another tool) is found, and an id holding ``#`` is split right."""
    import boto3
    from webhook_pipeline.adapters.dynamodb_items import delivery_key
    from webhook_pipeline.replay.archive_envelopes import recorded_outcomes

    from tests.helpers import create_deliveries_table

    client = boto3.client("dynamodb", region_name="us-east-1")
    create_deliveries_table(client, "deliveries")
    client.put_item(
        TableName="deliveries",
        Item={**delivery_key("stripe", "evt#1"), "outcome": {"S": "applied"}},
    )
    found = recorded_outcomes(client, "deliveries", [("stripe", "evt#1"), ("stripe", "evt_2")])
    assert found == {("stripe", "evt#1"): "applied", ("stripe", "evt_2"): None}
