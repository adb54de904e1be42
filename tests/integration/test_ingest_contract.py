"""The HTTP status contract of the ingest endpoint (the README's "The HTTP contract"), row by row,
against a real Redis and moto. Events are signed at the current time with the development
secrets."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from webhook_pipeline.fields import body_digest, json_array_items, parse_body
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    rest_api_event,
    signed_delivery,
)

from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()


def event_for(source: str, **kw):
    return http_api_event(signed_delivery(SOURCES[source], **kw))


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_new_delivery_of_every_source_is_accepted_and_enqueued(make_ingest, source: str) -> None:
    # Given the ingest function serving every example source (SOURCES is the catalogue)
    ingest = make_ingest(SOURCES_CATALOGUE="true")
    # And a correctly signed delivery of this provider
    provider = SOURCES[source].provider
    delivery = signed_delivery(SOURCES[source], resource="r1", sequence=7)
    # When it is posted
    response = ingest.invoke(http_api_event(delivery))
    # Then the provider's acknowledgement of a new delivery (by default 202 with its delivery id:
    # Discord's is a deferred response; a batch counts its events)
    n = len(delivery.delivery_ids)
    ours = (
        {"status": "accepted", "delivery_id": delivery.delivery_id}
        if provider.batch_path is None
        else {"status": "accepted", "events": n, "accepted": n, "duplicates": 0}
    )
    expected = provider.acknowledgement(202, ours)
    assert (response["statusCode"], response["body"]) == (expected.status, expected.text())
    assert response["headers"]["content-type"] == expected.content_type
    # And exactly one envelope per delivery on the queue
    envelopes = ingest.envelopes()
    assert [e["delivery_id"] for e in envelopes] == list(delivery.delivery_ids)
    envelope = envelopes[0]
    assert envelope["source"] == source
    assert envelope["delivery_id"] == delivery.delivery_id
    if provider.batch_path is None:
        assert base64.b64decode(envelope["body_b64"]) == delivery.body
    else:  # each event's exact bytes are enqueued
        items = json_array_items(delivery.body, provider.batch_path)
        assert [base64.b64decode(e["body_b64"]) for e in envelopes] == [i.raw for i in items]
    assert all(e["gate"] == "claimed" for e in envelopes)
    # And each carries the SHA-256 of its own bytes, and the content digest apart only where
    # the provider's volatile fields make it differ
    for item in envelopes:
        raw = base64.b64decode(item["body_b64"])
        assert item["body_sha256"] == hashlib.sha256(raw).hexdigest()
        document = parse_body(raw, SOURCES[source].body_format)
        digest = body_digest(raw, document, provider.volatile_fields)
        assert item.get("content_sha256") == (None if digest == item["body_sha256"] else digest)


def test_envelope_carries_ordering_fields_and_selected_headers_only(ingest: IngestHarness) -> None:
    delivery = signed_delivery(SOURCES["stripe"], resource="cus_42", sequence=1700000123)
    assert ingest.invoke(http_api_event(delivery))["statusCode"] == 202
    [envelope] = ingest.envelopes()
    assert envelope["resource_key"] == "cus_42"
    assert envelope["sequence"] == 1700000123
    assert envelope["event_type"] == "customer.updated"
    assert envelope["schema_version"] == 1
    assert "stripe-signature" not in envelope["headers"]
    assert envelope["headers"] == {"content-type": "application/json"}


def test_duplicate_answers_200_and_enqueues_nothing_more(ingest: IngestHarness) -> None:
    event = event_for("github")
    first = ingest.invoke(event)
    second = ingest.invoke(event)
    assert first["statusCode"] == 202
    assert second["statusCode"] == 200
    assert ingest.body(second)["status"] == "duplicate"
    assert len(ingest.messages()) == 1


def test_same_delivery_id_from_two_sources_is_not_a_duplicate(ingest: IngestHarness) -> None:
    # Dedup keys are scoped per source.
    a = ingest.invoke(event_for("github", delivery_id="same-guid"))
    b = ingest.invoke(event_for("shopify", delivery_id="same-guid"))
    assert (a["statusCode"], b["statusCode"]) == (202, 202)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda e: e["headers"].pop("x-hub-signature-256"), "signature_missing"),
        (
            lambda e: e["headers"].update({"x-hub-signature-256": "sha256=" + "0" * 64}),
            "signature_invalid",
        ),
        (lambda e: e.update(body=e["body"] + " "), "signature_invalid"),
    ],
)
def test_bad_signature_is_401_with_reason(ingest: IngestHarness, mutate, reason: str) -> None:
    event = event_for("github")
    mutate(event)
    response = ingest.invoke(event)
    assert response["statusCode"] == 401
    assert ingest.body(response) == {"status": "rejected", "reason": reason}
    assert ingest.messages() == []


# The wall clock runs between signing and verifying: margins of a minute keep a slow, loaded run
# from drifting back inside the tolerance (the exact boundaries are unit-tested with a fixed
# ``now`` in tests/unit/providers/test_shared.py).
@pytest.mark.parametrize(
    ("offset", "reason"), [(-360, "timestamp_stale"), (360, "timestamp_future")]
)
@pytest.mark.parametrize("source", ["stripe", "standard-webhooks", "slack", "generic-hmac"])
def test_timestamps_outside_tolerance_either_way_are_401(
    ingest: IngestHarness, source: str, offset: int, reason: str
) -> None:
    import time

    ingest.invoke(event_for("github"))  # warm: cold start and secret reads done before signing
    response = ingest.invoke(event_for(source, timestamp=int(time.time()) + offset))
    assert response["statusCode"] == 401
    assert ingest.body(response)["reason"] == reason


def test_unknown_source_is_404(ingest: IngestHarness) -> None:
    event = http_api_event(signed_delivery(SOURCES["github"]), path_source="nope")
    response = ingest.invoke(event)
    assert response["statusCode"] == 404
    assert ingest.body(response)["reason"] == "unknown_source"


def test_disabled_source_is_404(make_ingest, tmp_path) -> None:
    text = (SOURCES_FILE := _sources_file()).read_text()
    patched = text.replace(
        '[sources.github]\nprovider = "github"',
        '[sources.github]\nprovider = "github"\nenabled = false',
    )
    assert patched != text
    (tmp_path / "sources.toml").write_text(patched)
    harness = make_ingest(SOURCES_FILE=tmp_path / "sources.toml")
    response = harness.invoke(event_for("github"))
    assert response["statusCode"] == 404
    assert SOURCES_FILE.exists()


def _sources_file():
    from webhook_pipeline.sources import DEFAULT_SOURCES_FILE

    return DEFAULT_SOURCES_FILE


def test_authentic_delivery_without_delivery_id_is_400(ingest: IngestHarness) -> None:
    body = json.dumps({"object": "event", "type": "x"}).encode()  # no "id"
    response = ingest.invoke(event_for("stripe", body=body))
    assert response["statusCode"] == 400
    assert ingest.body(response)["reason"] == "delivery_id_missing"


def test_authentic_but_unparseable_body_is_400(ingest: IngestHarness) -> None:
    response = ingest.invoke(event_for("stripe", body=b"not json at all"))
    assert response["statusCode"] == 400


def test_delivery_id_over_256_chars_is_400_and_256_is_fine(ingest: IngestHarness) -> None:
    long_ok = ingest.invoke(event_for("github", delivery_id="a" * 256))
    too_long = ingest.invoke(event_for("github", delivery_id="a" * 257))
    assert long_ok["statusCode"] == 202
    assert too_long["statusCode"] == 400
    assert ingest.body(too_long)["reason"] == "delivery_id_too_long"


@pytest.mark.parametrize(
    "delivery_id", ["   ", "\t", "evt_\u0000x", "evt_\nx", "evt_\u2028x", "evt_\x7fx"]
)
def test_a_blank_or_unprintable_delivery_id_is_400(ingest: IngestHarness, delivery_id: str) -> None:
    # signed (Stripe's id is in the signed body), but no sender's ids look like this and an
    # operator could not look one up: refused, nothing claimed or enqueued
    response = ingest.invoke(event_for("stripe", delivery_id=delivery_id))
    assert (response["statusCode"], ingest.body(response)["reason"]) == (
        400,
        "delivery_id_invalid",
    )
    assert ingest.messages() == []


def test_odd_delivery_ids_are_hashed_in_the_gate_key(ingest: IngestHarness, redis_url: str) -> None:
    import redis

    odd = "id with spaces/and:colons\u00e9" + "x" * 100
    assert ingest.invoke(event_for("github", delivery_id=odd))["statusCode"] == 202
    assert ingest.invoke(event_for("github", delivery_id=odd))["statusCode"] == 200
    keys = redis.Redis.from_url(redis_url).keys("*")
    assert len(keys) == 1 and keys[0].startswith(b"whd:github:#")
    assert len(keys[0]) == len("whd:github:#") + 64


def test_ordering_value_of_the_wrong_type_is_400(ingest: IngestHarness) -> None:
    body = json.dumps(
        {"id": "evt_x", "type": "t", "created": "yesterday", "data": {"object": {"id": "cus_1"}}}
    ).encode()
    response = ingest.invoke(event_for("stripe", body=body))
    assert response["statusCode"] == 400
    assert ingest.body(response)["reason"] == "sequence_invalid"


def test_body_over_the_limit_is_413_before_anything_else(make_ingest) -> None:
    harness = make_ingest(MAX_BODY_BYTES=1000)
    big = signed_delivery(SOURCES["github"], body=b"{" + b" " * 2000 + b"}")
    response = harness.invoke(http_api_event(big))
    assert response["statusCode"] == 413
    assert harness.messages() == []


def test_body_over_the_inline_threshold_goes_to_s3_claim_check(make_ingest) -> None:
    harness = make_ingest(INLINE_BODY_MAX_BYTES=100)
    body = json.dumps({"id": "evt_big", "type": "t", "pad": "x" * 500}).encode()
    response = harness.invoke(event_for("stripe", body=body))
    assert response["statusCode"] == 202
    [envelope] = harness.envelopes()
    assert "body_b64" not in envelope
    ref = envelope["body_ref"]
    stored = harness.s3.get_object(Bucket=ref["bucket"], Key=ref["key"])["Body"].read()
    assert stored == body
    assert envelope["body_size"] == len(body)


def test_rest_api_v1_event_is_accepted(ingest: IngestHarness) -> None:
    delivery = signed_delivery(SOURCES["github"])
    response = ingest.invoke(rest_api_event(delivery))
    assert response["statusCode"] == 202


def test_slack_url_verification_handshake_answers_the_challenge_after_verifying(
    ingest: IngestHarness,
) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "abc123", "token": "t"}).encode()
    ok = ingest.invoke(event_for("slack", body=body))
    assert ok["statusCode"] == 200
    assert ingest.body(ok) == {"challenge": "abc123"}
    forged = ingest.invoke(event_for("slack", body=body, secret="wrong"))
    assert forged["statusCode"] == 401
    assert ingest.messages() == []


def test_previous_secret_is_accepted_during_rotation_and_counted(make_ingest, capsys) -> None:
    import boto3

    from tests.integration.ingest_harness import SECRETS_PREFIX

    boto3.client("secretsmanager").put_secret_value(
        SecretId=f"{SECRETS_PREFIX}github",
        SecretString=json.dumps(
            {"current": "new-secret", "previous": "dev-github-secret-local-only"}
        ),
    )
    harness = make_ingest()
    capsys.readouterr()
    old = harness.invoke(event_for("github"))  # signed with the previous (dev) secret
    new = harness.invoke(event_for("github", secret="new-secret"))
    assert (old["statusCode"], new["statusCode"]) == (202, 202)
    emitted = _metric_lines(capsys.readouterr().out)
    assert sum(_value(m, "VerifiedWithPreviousSecret") for m in emitted) == 1


def test_metrics_are_emitted_per_outcome(ingest: IngestHarness, capsys) -> None:
    event = event_for("github")
    ingest.invoke(event)
    ingest.invoke(event)
    bad = event_for("github")
    bad["headers"]["x-hub-signature-256"] = "sha256=" + "1" * 64
    ingest.invoke(bad)
    emitted = _metric_lines(capsys.readouterr().out)
    totals: dict[str, float] = {}
    for m in emitted:
        for name in ("Accepted", "DuplicateDiscarded", "SignatureInvalid"):
            totals[name] = totals.get(name, 0) + _value(m, name)
        assert m["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "WebhookPipeline"
    assert totals == {"Accepted": 1, "DuplicateDiscarded": 1, "SignatureInvalid": 1}


def test_logs_never_contain_the_secret_or_the_signature(ingest: IngestHarness, capsys) -> None:
    event = event_for("github")
    ingest.invoke(event)
    bad = event_for("github", secret="wrong-secret")
    ingest.invoke(bad)
    out = capsys.readouterr().out
    assert "dev-github-secret-local-only" not in out
    assert event["headers"]["x-hub-signature-256"].split("=", 1)[1] not in out
    assert bad["headers"]["x-hub-signature-256"].split("=", 1)[1] not in out


def _value(metric_line: dict, name: str) -> float:
    value = metric_line.get(name, 0)
    return sum(value) if isinstance(value, list) else value


def _metric_lines(stdout: str) -> list[dict]:
    found = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{") and '"_aws"' in line:
            found.append(json.loads(line))
    return found


def test_meta_notification_is_accepted_and_deduplicated_on_its_body_digest(ingest) -> None:
    import hashlib

    delivery = signed_delivery(SOURCES["meta"])
    first = ingest.invoke(http_api_event(delivery))
    again = ingest.invoke(http_api_event(delivery))
    assert (first["statusCode"], again["statusCode"]) == (202, 200)
    assert ingest.body(first)["delivery_id"] == hashlib.sha256(delivery.body).hexdigest()


def test_meta_get_hub_challenge_is_answered_as_plain_text_with_the_right_token(ingest) -> None:
    from webhook_pipeline_ops.simulator.deliveries import dev_verify_token, subscription_get_event

    ok = ingest.invoke(
        subscription_get_event(
            "meta",
            {
                "hub.mode": "subscribe",
                "hub.verify_token": dev_verify_token("meta"),
                "hub.challenge": "1158201444",
            },
        )
    )
    assert ok["statusCode"] == 200
    assert ok["body"] == "1158201444"
    assert ok["headers"]["content-type"].startswith("text/plain")
    wrong = ingest.invoke(
        subscription_get_event(
            "meta", {"hub.mode": "subscribe", "hub.verify_token": "guess", "hub.challenge": "1"}
        )
    )
    assert wrong["statusCode"] == 401
    assert ingest.body(wrong)["reason"] == "verify_token_invalid"
    assert ingest.messages() == []


def test_get_to_a_source_without_a_handshake_is_405(ingest) -> None:
    from webhook_pipeline_ops.simulator.deliveries import subscription_get_event

    response = ingest.invoke(subscription_get_event("github", {"hub.mode": "subscribe"}))
    assert response["statusCode"] == 405
    assert ingest.body(response)["reason"] == "method_not_allowed"
