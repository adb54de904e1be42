"""Signed strings without delimiters, re-cut (invariant I8), through the real ingest handler.

Where a scheme signs a concatenation with no separator (Twilio's URL + sorted names and values,
Square's URL + body, HubSpot's method + URI + body + timestamp, Discord's, Zendesk's and
SendGrid's timestamp + body, Twitch's id + timestamp + body, Mailgun's timestamp + token, a
generic ``{body}{timestamp}`` template), a captured request can be sent again with a boundary
moved and the same signature. Each test moves one and asserts that the copy is no second
delivery: refused, or read as the same identity. docs/providers.md, "Signed strings without
delimiters", says why each holds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.providers import provider_class
from webhook_pipeline.webhook_request import WebhookRequest
from webhook_pipeline_ops.simulator.deliveries import (
    SampleDelivery,
    example_sources,
    http_api_event,
    request_event,
    signed_delivery,
)

from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()


def answer(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, Any]:
    response = harness.invoke(event)
    try:
        return response["statusCode"], json.loads(response["body"])
    except ValueError:
        return response["statusCode"], response["body"]


def resend(
    d: SampleDelivery, body: bytes, headers: dict[str, str], raw_query: str | None = None
) -> dict[str, Any]:
    """``d`` sent again with another body and headers (its signature kept)."""
    query = raw_query if raw_query is not None else d.query_string
    return request_event(
        d.source,
        "POST",
        body,
        headers,
        dict(parse_qsl(query, keep_blank_values=True)) or None,
        request_key=f"recut-{uuid.uuid4().hex}",
        raw_query=query,
    )


def only_the_genuine_is_recorded(
    harness: IngestHarness, d: SampleDelivery, recuts: list[dict[str, Any]]
) -> list[tuple[int, Any]]:
    """Send ``d``, then each re-cut: the answers to the re-cuts; asserts that the genuine one is
    accepted and that no re-cut became a delivery of its own."""
    code, _ = answer(harness, http_api_event(d))
    assert code < 300
    answers = [answer(harness, event) for event in recuts]
    assert [e["delivery_id"] for e in harness.envelopes()] == list(d.delivery_ids)
    return answers


# -- Twilio: URL + (name + value) for each parameter sorted by name -----------------------------


def test_twilio_status_folded_into_the_next_parameter_is_refused(ingest: IngestHarness) -> None:
    # The review's input: MessagingServiceSid folded into the value of MessageStatus
    d = signed_delivery(SOURCES["twilio"], event_type="delivered")
    params = dict(parse_qsl(d.body.decode()))
    recut = {k: v for k, v in params.items() if k != "MessagingServiceSid"}
    recut["MessageStatus"] += "MessagingServiceSid" + params["MessagingServiceSid"]
    answers = only_the_genuine_is_recorded(
        ingest, d, [resend(d, urlencode(recut).encode(), dict(d.headers))]
    )
    assert answers == [(400, {"status": "rejected", "reason": "field_invalid"})]


def test_twilio_a_second_identity_inside_a_value_is_refused_both_ways(
    ingest: IngestHarness,
) -> None:
    # A parameter sorted after MessageStatus (ProfileName: the sender's own WhatsApp name)
    # holding "MessageSid<SID>MessageStatusread": From can absorb the genuine pair, so the
    # signed string reads two identities. Neither cut can be told from the other.
    sid, other = "SM" + uuid.uuid4().hex, "SM" + uuid.uuid4().hex
    plain = dict(parse_qsl(signed_delivery(SOURCES["twilio"], delivery_id=sid).body.decode()))
    genuine = plain | {"ProfileName": f"MessageSid{other}MessageStatusread"}
    d = signed_delivery(SOURCES["twilio"], delivery_id=sid, body=urlencode(genuine).encode())
    names = sorted(genuine)
    absorbed = (
        "".join(n + genuine[n] for n in names if "MessageSid" <= n < "ProfileName") + "ProfileName"
    )
    recut = {n: genuine[n] for n in names if n < "From" or n > "ProfileName"}
    recut |= {"From": genuine["From"] + absorbed, "MessageSid": other, "MessageStatus": "read"}
    ambiguous = (400, {"status": "rejected", "reason": "field_ambiguous"})
    assert answer(ingest, http_api_event(d)) == ambiguous
    assert answer(ingest, resend(d, urlencode(recut).encode(), dict(d.headers))) == ambiguous
    assert ingest.messages() == []


def test_twilio_an_identity_in_a_value_that_cannot_be_cut_in_sorted_order_is_one_delivery(
    ingest: IngestHarness,
) -> None:
    # Body (sorted before From) holds "MessageSid<SID>ZZMessageStatussent": read there, the gap
    # "ZZ" would have to be a parameter named between MessageSid and MessageStatus, and "Z"
    # sorts after both, so the signed string has one reading: the genuine callback is accepted
    sid, other = "SM" + uuid.uuid4().hex, "SM" + uuid.uuid4().hex
    plain = dict(parse_qsl(signed_delivery(SOURCES["twilio"], delivery_id=sid).body.decode()))
    genuine = plain | {"Body": f"MessageSid{other}ZZMessageStatussentzz"}
    d = signed_delivery(SOURCES["twilio"], delivery_id=sid, body=urlencode(genuine).encode())
    code, _ = answer(ingest, http_api_event(d))
    assert code == 202
    assert [e["delivery_id"] for e in ingest.envelopes()] == [f"{sid}:{plain['MessageStatus']}"]


def test_twilio_a_voice_callback_with_its_sequence_read_as_an_integer_is_accepted(
    make_ingest: Callable[..., IngestHarness], tmp_path: Path
) -> None:
    # A voice status callback ordered by SequenceNumber (read as an integer): Timestamp follows
    # it in sorted order, so only its digits may be the value ("3", never "3T...")
    path = tmp_path / "sources.toml"
    path.write_text(
        '[sources.twilio-voice]\nprovider = "twilio"\nsecret = "twilio"\n'
        'delivery_id = { body = ["CallSid", "CallStatus"] }\n'
        'event_type = { body = "CallStatus" }\n'
        'resource_key = { body = "CallSid" }\n'
        'sequence = { body = "SequenceNumber", format = "int" }\n'
    )
    harness = make_ingest(SOURCES_FILE=str(path))
    call = "CA" + uuid.uuid4().hex
    callback = {
        "AccountSid": "AC" + "3" * 32,
        "ApiVersion": "2010-04-01",
        "CallSid": call,
        "CallStatus": "ringing",
        "Called": "+14155550199",
        "Caller": "+14155550100",
        "Direction": "outbound-api",
        "SequenceNumber": "3",
        "Timestamp": "Tue, 01 Dec 2026 12:00:00 +0000",
    }
    source = example_sources(str(path))["twilio-voice"]
    d = signed_delivery(source, body=urlencode(callback).encode())
    code, body = answer(harness, http_api_event(d))
    assert code == 202, body
    (envelope,) = harness.envelopes()
    assert (envelope["delivery_id"], envelope["sequence"]) == (f"{call}:ringing", 3)


# -- Adyen: the eight fields joined with ":" (a colon only in merchantReference) -----------------


def test_adyen_a_colon_moved_into_another_field_is_refused(ingest: IngestHarness) -> None:
    # (the colon moved one field to the left is test_hostile_review's)
    d = signed_delivery(SOURCES["adyen"])
    doc = json.loads(d.body)
    item = doc["notificationItems"][0]["NotificationRequestItem"]
    item["merchantReference"] = "order:42"
    d = signed_delivery(SOURCES["adyen"], body=json.dumps(doc).encode())
    doc = json.loads(d.body)
    item = doc["notificationItems"][0]["NotificationRequestItem"]
    item["merchantAccountCode"] += ":order"
    item["merchantReference"] = "42"
    answers = only_the_genuine_is_recorded(
        ingest, d, [resend(d, json.dumps(doc).encode(), dict(d.headers))]
    )
    assert answers == [(401, {"status": "rejected", "reason": "signature_malformed"})]


# -- Square: notification URL + body --------------------------------------------------------------


def test_square_body_moved_into_the_query_is_refused(ingest: IngestHarness) -> None:
    d = signed_delivery(SOURCES["square"], url="https://localhost/webhooks/square?k=v")
    assert d.query_string == "k=v"
    headers = dict(d.headers)
    into_query = resend(d, d.body[1:], headers, raw_query="k=v" + d.body[:1].decode())
    from_query = resend(d, b"v" + d.body, headers, raw_query="k=")
    answers = only_the_genuine_is_recorded(ingest, d, [into_query, from_query])
    assert [a[0] for a in answers] == [400, 400]  # body_not_json: a JSON text has one start


# -- timestamp then body, no separator ---------------------------------------------------------


@pytest.mark.parametrize("source", ["discord", "zendesk", "sendgrid"])
def test_timestamp_and_body_recut_is_refused(ingest: IngestHarness, source: str) -> None:
    d = signed_delivery(SOURCES[source])
    header = SOURCES[source].provider.timestamp_header
    assert header is not None
    ts = d.headers[header]
    longer = resend(d, d.body[1:], dict(d.headers) | {header: ts + d.body[:1].decode()})
    shorter = resend(d, ts[-1:].encode() + d.body, dict(d.headers) | {header: ts[:-1]})
    answers = only_the_genuine_is_recorded(ingest, d, [longer, shorter])
    assert all(code == 401 for code, _ in answers), answers


# -- HubSpot: method + URI + body + timestamp -----------------------------------------------------


def test_hubspot_body_and_timestamp_recut_is_refused(ingest: IngestHarness) -> None:
    d = signed_delivery(SOURCES["hubspot"])
    header = "X-HubSpot-Request-Timestamp"
    ts = d.headers[header]
    longer_body = resend(d, d.body + ts[:1].encode(), dict(d.headers) | {header: ts[1:]})
    longer_ts = resend(d, d.body[:-1], dict(d.headers) | {header: d.body[-1:].decode() + ts})
    answers = only_the_genuine_is_recorded(ingest, d, [longer_body, longer_ts])
    assert all(code == 401 for code, _ in answers), answers


# -- Twitch: message id + timestamp + body ----------------------------------------------------


def test_twitch_id_timestamp_and_body_recut_is_refused(ingest: IngestHarness) -> None:
    d = signed_delivery(SOURCES["twitch"])
    id_h, ts_h = "Twitch-Eventsub-Message-Id", "Twitch-Eventsub-Message-Timestamp"
    mid, ts = d.headers[id_h], d.headers[ts_h]
    recuts = [
        dict(d.headers) | {id_h: mid + ts[:1], ts_h: ts[1:]},
        dict(d.headers) | {id_h: mid[:-1], ts_h: mid[-1:] + ts},
    ]
    events = [resend(d, d.body, h) for h in recuts]
    events.append(resend(d, d.body[1:], dict(d.headers) | {ts_h: ts + d.body[:1].decode()}))
    answers = only_the_genuine_is_recorded(ingest, d, events)
    assert all(code == 401 for code, _ in answers), answers


# -- Mailgun: timestamp + token ---------------------------------------------------------------


def test_mailgun_timestamp_and_token_recut_is_refused(ingest: IngestHarness) -> None:
    d = signed_delivery(SOURCES["mailgun"])
    doc = json.loads(d.body)
    sig = doc["signature"]
    ts, token = sig["timestamp"], sig["token"]
    bodies = [
        doc | {"signature": sig | {"timestamp": ts + token[:1], "token": token[1:]}},
        doc | {"signature": sig | {"timestamp": ts[:-1], "token": ts[-1:] + token}},
    ]
    events = [resend(d, json.dumps(b).encode(), dict(d.headers)) for b in bodies]
    answers = only_the_genuine_is_recorded(ingest, d, events)
    assert all(code == 401 for code, _ in answers), answers


# -- generic HMAC: a {body}{timestamp} template -----------------------------------------------


def test_generic_body_then_timestamp_recut_is_refused() -> None:
    # A raw body whose digest is the delivery id, signed right before its timestamp: a body
    # ending in "0" could give that digit to the timestamp ("0" + ts is the same time)
    options = {
        "header": "X-Sig",
        "timestamp_header": "X-Timestamp",
        "signed_template": "{body}{timestamp}",
    }
    scheme = provider_class("generic-hmac")(options)
    now = 1_796_187_807
    body = b"amount=10"
    headers = scheme.sign(body, "k", timestamp=now, delivery_id="")

    def verify(body: bytes, ts: str) -> None:
        request = WebhookRequest(
            "POST", "g", {k.lower(): v for k, v in (headers | {"X-Timestamp": ts}).items()}, body
        )
        scheme.verify(request, ["k"], now)

    verify(body, str(now))  # the genuine request
    with pytest.raises(VerificationError) as err:
        verify(body[:-1], "0" + str(now))
    assert err.value.reason == "timestamp_invalid"
